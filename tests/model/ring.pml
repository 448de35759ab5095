/* A model of the ringlog ring's protocol (ringlog/src/ring.cpp, reader.cpp,
 * repair.cpp), checked by Spin. Every step carries the label of the code's access
 * (docs/RING.md section 3); section 9 of that document says what the model covers,
 * what it leaves out and which memory order each step assumes. It must never be
 * weakened to make a check pass: a mutant (MUTANT_*) that passes is a hole in it.
 *
 * The model is sequentially consistent: each step below is one access (or, inside
 * atomic{}, accesses that nobody else can observe apart) in program order. The code's
 * acquire/release pairs and fences are what make that order hold on real hardware;
 * docs/RING.md section 9 lists the pairing behind each step.
 *
 * Configuration (spin -D...): N area bytes; NA writer threads in process A (sharing
 * A's wait queue), NB in process B, NC in process C (one each); MSGS messages per
 * writer; PINNED, PASSIVE readers (0/1); KILL bit mask of processes that may die
 * (at most one does, at any step); CHECKS: lock holders run the dead-process check
 * (recover_dead) whenever the code may; WW: batches a process lets wait on one
 * writer still copying (RING.writer_waits) before dropping.
 */

#ifndef N
#define N 7
#endif
#ifndef NA
#define NA 2
#endif
#ifndef NB
#define NB 1
#endif
#ifndef NC
#define NC 0
#endif
#ifndef MSGS
#define MSGS 1
#endif
#ifndef PINNED
#define PINNED 1
#endif
#ifndef PASSIVE
#define PASSIVE 1
#endif
#ifndef KILL
#define KILL 0
#endif
#ifndef CHECKS
#define CHECKS 0
#endif
#ifndef WW
#define WW 1
#endif

#define NW (NA + NB + NC)
#define NMSG (NW * MSGS)
#define PA 0
#define PB 1
#define PC 2
#define PPIN 3
#define PPAS 4
#define NPROC 5
#define NONE 255
#define PROC(w) ((w) < NA -> PA : ((w) < NA + NB -> PB : PC))

/* Bytes of the area. RC bytes: 0..254 readers parked, 255 a writer is filling what
 * follows. A message is RC | H | payload: H = the message id 1..NMSG (odd ids carry a
 * one-byte payload equal to the id, even ids none), or PAD0 + k for a pad with k zero
 * payload bytes. The varint of the code is one byte here: the framing is H. */
#define FF 255
#define PAD0 32
#define OFF(p) ((p) % N)
#define RC(p) area[OFF(p)]
#define LENOF(id) ((id) % 2)
#define SPANOF(hb) (((hb) >= 1 && (hb) <= NMSG) -> 2 + LENOF(hb) : (((hb) >= PAD0 && (hb) < PAD0 + N) -> (hb) - PAD0 + 2 : 0))
#define UNK 200       /* owner_saved_rc "not recorded" (kRcNotRecorded) */
#define NOPOS 255     /* reader slot pos kNoPos */

/* owner word: writer w as w + 1 (its slot is w); a lock taken with no writer slot
 * (recoverer, pinned reader) as OWNX + process. */
#define OWNX 16
#define OWNER_PROC(o) ((o) >= OWNX -> (o) - OWNX : PROC((o) - 1))

/* Cell states (Q2/Q10) */
#define WAITING 0
#define DONE 1
#define DROPPED 2
#define NOTREADY 255

/* Ghost fate of a message id */
#define F_PENDING 0
#define F_ACCEPTED 1   /* reserved: W3 published it */
#define F_DROPPED 2
#define F_COMPLETE 3   /* exposed: W4 */
#define F_TORN 4       /* its writer died before W4; recovery padded it */

/* ---- shared state (the file) */
byte area[N];
byte head = 0;
byte tail = 1;          /* absolute, without the lock bit */
bool locked = 0;        /* the tail's lock bit */
byte owner = 0;
byte owner_saved = UNK;
byte pinned = 0;
/* writer slots: slot w belongs to writer w */
bool slot_pid[NW];
byte inf_pos[NW];       /* x + 1, 0 = nothing in flight */
byte inf_end[NW];
byte inf_saved[NW];
/* the pinned reader's slot */
bool rs_pid = 0;
byte rs_pos = NOPOS;
byte rs_next = 0;
/* counters */
byte torn_discarded = 0, lock_recoveries = 0;
hidden byte msgs_dropped, writer_waits, readers_released;   /* counted, never read */

/* ---- private state of processes A, B, C: wait queues and their cells (cell w + 1) */
byte qhead[3];
byte cnext[NW];
byte cid[NW];
byte ntot[NW];
byte ctot[NW];
byte cstate[NW];
byte stuck_pos[3];
byte stuck_n[3];

/* ---- process death */
bool dead[NPROC];
bool wover[NW];          /* writer returned from its last write */

/* ---- ghosts, for the properties only */
byte hold_proc = NONE;   /* who holds the tail lock */
byte fate[NMSG + 1];
byte order[NMSG];        /* accepted ids in position order */
byte norder = 0;
byte gb_first[NW];       /* the batch recorded in slot w: order[gb_first .. + gb_n) */
bool gb_pub[NW];         /* ... and its W3 ran: published (recovery may pad only such) */
byte gb_n[NW];
bool pv_on = 0;          /* the passive reader is between R2 and P2 at pv_pos */
byte pv_pos = 0;
bool pv_d1 = 0, pv_d2 = 0;  /* a writer stored to pv_pos+1 / pv_pos+2 meanwhile */
bool pw_on = 0;          /* ... and at pw_pos, the second message of its batch */
byte pw_pos = 0;
bool pw_d1 = 0, pw_d2 = 0;
bool pin_done = 0, pas_done = 0;

byte wproc[NW];          /* PROC(w), for the LTL formula */
#if NW == 1
#define ALLOVER ((wover[0] || dead[wproc[0]]))
#elif NW == 2
#define ALLOVER ((wover[0] || dead[wproc[0]]) && (wover[1] || dead[wproc[1]]))
#else
#define ALLOVER ((wover[0] || dead[wproc[0]]) && (wover[1] || dead[wproc[1]]) && (wover[2] || dead[wproc[2]]))
#endif
#define SOMEDEAD (dead[PA] || dead[PB] || dead[PC])

/* A writer's store into the area: notes it for the passive reader's property. */
#define WSTORE(p, v) \
  area[OFF(p)] = (v); \
  if \
  :: pv_on && OFF(p) == OFF(pv_pos + 1) -> pv_d1 = 1 \
  :: pv_on && OFF(p) == OFF(pv_pos + 2) -> pv_d2 = 1 \
  :: else -> skip \
  fi; \
  if \
  :: pw_on && OFF(p) == OFF(pw_pos + 1) -> pw_d1 = 1 \
  :: pw_on && OFF(p) == OFF(pw_pos + 2) -> pw_d2 = 1 \
  :: else -> skip \
  fi

/* After every completed or dropped write, and every unlock: no 0xFF at tail - 1. */
#define ASSERT_TAIL_RC(t) assert(RC((t) - 1) != FF)

/* The framing from head to tail - 1 is intact: every RC byte is followed by a good
 * frame ending before tail - 1, except the 0xFF of a batch in flight, which a writer
 * slot records (it is skipped to its end). Run under the tail lock, in one step. */
inline check_framing() {
  fp = head;
  do
  :: fp + 1 >= tail -> break
  :: else ->
     if
     :: RC(fp) == FF ->
        xj = 0;
        do
        :: xj < NW && !(inf_pos[xj] == fp + 1 && inf_end[xj] <= tail) -> xj++
        :: else -> break
        od;
        assert(xj < NW);   /* a 0xFF no writer slot accounts for */
        fp = inf_end[xj] - 1
     :: else ->
        fsp = SPANOF(area[OFF(fp + 1)]);
        assert(fsp != 0 && fp + fsp <= tail - 1);
        fp = fp + fsp
     fi
  od;
  assert(fp == tail - 1);
  fp = 0; xj = 0; fsp = 0
}

/* repair::write_pad(from, to): one pad exactly filling [from, to) (the RC at from is
 * left to the caller). T5. */
inline write_pad(from, to) {
  WSTORE(from + 1, PAD0 + (to - from - 2));
  fp = from + 2;
  do
  :: fp < to -> WSTORE(fp, 0); fp++
  :: else -> break
  od
}

/* repair::recover_dead, writer part: T1..T6, S5. Under the tail lock. */
inline recover_dead_writers() {
  atomic {
    xi = 0;
    do
    :: xi < NW ->
       /* T1: slot pid; T2: inflight_pos != 0; the writer is dead */
       if
       :: slot_pid[xi] && inf_pos[xi] != 0 && dead[PROC(xi)] ->
          fx = inf_pos[xi] - 1; fe = inf_end[xi];     /* T3 */
          if
          :: fx >= head && fe <= tail && fe >= fx + 3 && RC(fx) == FF ->   /* T4 */
             /* a torn batch is one its dead writer published, never a live one's */
             assert(gb_pub[xi]);
             write_pad(fx, fe - 1);                   /* T5 */
             RC(fx) = inf_saved[xi];                  /* T6 */
             torn_discarded++;
             xj = gb_first[xi];
             do
             :: xj < gb_first[xi] + gb_n[xi] -> fate[order[xj]] = F_TORN; xj++
             :: else -> break
             od
          :: else -> skip
          fi;
          inf_pos[xi] = 0; slot_pid[xi] = 0           /* S5: forget_writer */
       :: else -> skip
       fi;
       xi++
    :: else -> break
    od;
    xi = 0; xj = 0; fx = 0; fe = 0;
    check_framing()
  }
}

/* repair::recover_dead, reader part: release a dead pinned reader (U1..U4, S4), then
 * the recount at head (U5..U9). Under the tail lock. */
inline recover_dead_readers() {
  atomic {
    if
    :: rs_pid && dead[PPIN] ->                        /* U1 */
       fp = rs_pos;                                   /* U2 */
       xi = 0;                                        /* busy */
       if
       :: fp != NOPOS && fp >= head && fp < tail ->
          if
          :: RC(fp) == FF -> xi = 1                   /* a writer holds it: next time */
          :: RC(fp) == 0 -> skip
          :: else -> RC(fp) = RC(fp) - 1              /* U3 */
          fi
       :: else -> skip
       fi;
       if
       :: xi == 0 ->
          if :: fp != NOPOS -> pinned-- :: else -> skip fi;   /* U4 */
          rs_pos = NOPOS; rs_next = 0; rs_pid = 0;    /* S4 */
          readers_released++
       :: else -> skip
       fi
    :: else -> skip
    fi;
    fp = 0; xi = 0
  };
  /* the recount at head: U5, then U6/U7 (pid, next_pos), U8 (pos), U9 */
  fx = head;
  fe = RC(fx);                                        /* U5 */
  if
  :: fe != 0 && fe != FF ->
     xi = (rs_pid && rs_next == fx + 1);              /* U6, U7 */
     xi = xi || (rs_pid && rs_pos == fx);             /* U8 */
     atomic {
       if
       :: !xi && RC(fx) == fe -> RC(fx) = 0; readers_released++   /* U9 */
       :: else -> skip
       fi;
       xi = 0; fx = 0; fe = 0
     }
  :: else -> atomic { xi = 0; fx = 0; fe = 0 }
  fi
}

inline recover_dead() {
  recover_dead_writers();
  recover_dead_readers()
}

/* Ring::Impl::unlock_tail(t): L3, L4. */
inline unlock_tail(ut) {
  owner = 0; owner_saved = UNK;                       /* L3 */
  atomic {                                            /* L4 */
    ASSERT_TAIL_RC(ut);
    assert(locked && tail == ut);
    locked = 0; hold_proc = NONE
  }
}

/* D9: an unrecorded owner's lock (o = 0) is recovered only if no recovery happened
 * since the watch began (lock_recoveries unchanged): otherwise another recoverer
 * released that lock meanwhile and a live writer may hold it again at the same value,
 * owner word still 0. MUTANT_NO_UNKNOWN_OWNER_BACKOFF drops the check, as the code
 * did before: a recoverer then takes a live holder's lock (docs/RING.md section 7). */
#ifdef MUTANT_NO_UNKNOWN_OWNER_BACKOFF
#define D3_BACKOFF(o) true
#else
#define D3_BACKOFF(o) ((o) != 0 || lock_recoveries == unk_rec)
#endif

/* Ring::Impl::recover_dead_owner(locked): the tail stayed locked at lt and its owner
 * o is dead (or unknown, o = 0, after the longer wait). me: our process. */
inline recover_dead_owner(o, lt, me) {
  atomic {                                            /* D2: owner CAS o -> ours */
    if
    :: owner == o -> owner = OWNX + me; ok = 1
    :: else -> ok = 0
    fi
  };
  if
  :: ok ->
     atomic {                                         /* D3: tail still the locked value */
       if
       :: locked && tail == lt && D3_BACKOFF(o) ->
          /* the property: a recoverer never takes the lock of a live holder */
          assert(hold_proc == NONE || dead[hold_proc]);
          hold_proc = me; ok = 1
       :: else -> ok = 0
       fi
     };
     if
     :: !ok ->
        atomic { if :: owner == OWNX + me -> owner = o :: else -> skip fi };  /* D4 */
        unk_on = 0
     :: else ->
        atomic {
          fx = owner_saved;                           /* D6 */
          if
          :: RC(lt - 1) == FF ->                      /* D5 */
             if
             :: fx >= UNK ->                          /* D7: live readers parked there */
                fx = ((rs_pid && !dead[PPIN] && (rs_pos == lt - 1 || rs_next == lt)) -> 1 : 0)
             :: else -> skip
             fi;
             RC(lt - 1) = fx                          /* D8 */
          :: else -> skip
          fi;
          /* undo_dead_lock: the owner's batch never got published: forget it */
          if
          :: o >= 1 && o <= NW && slot_pid[o - 1] -> inf_pos[o - 1] = 0; slot_pid[o - 1] = 0  /* S5 */
          :: else -> skip
          fi;
#ifndef MUTANT_UNKNOWN_OWNER_KEEPS_RECORD
          /* an unknown owner that died between L3 and W3: its slot records the batch
           * it never published at lt; forget it (recover_dead_owner) */
          if
          :: o == 0 ->
             xi = 0;
             do
             :: xi < NW ->
                if
                :: slot_pid[xi] && dead[PROC(xi)] && inf_pos[xi] == lt -> inf_pos[xi] = 0; slot_pid[xi] = 0  /* S5 */
                :: else -> skip
                fi;
                xi++
             :: else -> break
             od;
             xi = 0
          :: else -> skip
          fi;
#endif
          owner_saved = UNK;
          lock_recoveries++;
          check_framing()
        };
        unk_on = 0;
        unlock_tail(lt)
     fi
  :: else -> skip
  fi;
  atomic { ok = 0; o = 0; lt = 0; fx = 0 }
}

/* The unknown owner's lock is recovered only while a registered process is dead:
 * some writer slot, or the pinned reader's slot (readers lock the tail too). */
#if NW == 1
#define DEAD_WRITER_SLOT (slot_pid[0] && dead[wproc[0]])
#elif NW == 2
#define DEAD_WRITER_SLOT ((slot_pid[0] && dead[wproc[0]]) || (slot_pid[1] && dead[wproc[1]]))
#else
#define DEAD_WRITER_SLOT ((slot_pid[0] && dead[wproc[0]]) || (slot_pid[1] && dead[wproc[1]]) || \
                          (slot_pid[2] && dead[wproc[2]]))
#endif
#define ANY_DEAD_SLOT (DEAD_WRITER_SLOT || (rs_pid && dead[PPIN]))

/* Waiting on a locked tail (lock_tail, write_queued): take it when free (L1, L2), or
 * recover it from a dead owner. The bounded waits before suspecting the owner are
 * abstracted: the check may run at any moment, but a live owner is never judged dead
 * (liveness is pid and start time), and the unknown owner's one-second wait matures
 * only if the holder really is dead or the lock changed hands through a recovery since
 * the wait began (a live holder does not stay between L1 and L2 for a second). */
#define LOCK_FREE_TAKE(me) \
  atomic { !locked -> locked = 1; t = tail; hold_proc = me }
#define OWNER_DEAD_SEEN \
  atomic { locked && owner != 0 && dead[OWNER_PROC(owner)] -> o = owner; lt = tail }
#define UNKNOWN_WATCH_START \
  atomic { locked && owner == 0 && !(unk_on && unk_tail == tail) -> \
           unk_on = 1; unk_tail = tail; unk_rec = lock_recoveries }
#define UNKNOWN_MATURED \
  atomic { locked && owner == 0 && unk_on && unk_tail == tail && ANY_DEAD_SLOT && \
           (dead[hold_proc] || lock_recoveries != unk_rec) -> o = 0; lt = tail }

/* Ring::Impl::lock_tail(slot) with owner word ow. */
inline lock_tail(me, ow) {
  do
  :: LOCK_FREE_TAKE(me); owner = ow; break            /* L1, L2 */
  :: OWNER_DEAD_SEEN; recover_dead_owner(o, lt, me)   /* D1 */
  :: UNKNOWN_WATCH_START
  :: UNKNOWN_MATURED; recover_dead_owner(o, lt, me)
  od
}

/* ---- the writer */

/* Steps that a process death may separate: apart when processes may die, one step
 * otherwise (nobody else reads what lies between them). */
#if KILL
#define SPLIT }; atomic {
#else
#define SPLIT ;
#endif

/* Reclaim (H1 at each message from head, in one step): advance hd over messages
 * whose RC is 0 until the batch fits; stop at any other RC or at bad framing. One
 * step: the RC bytes it reads change meanwhile only by pinned readers, which take the
 * next byte before leaving theirs (R3 before R4), and by W4/T6 turning a 0xFF into a
 * count, so the first non-zero byte met is met in either order. */
inline reclaim() {
  atomic {
    do
    :: hd + N >= nt -> break
    :: else ->
       c = RC(hd);                                    /* H1 */
#ifdef MUTANT_RECLAIM_PAST_READER
       sp = ((c != FF) -> SPANOF(area[OFF(hd + 1)]) : 0);
#else
       sp = ((c == 0) -> SPANOF(area[OFF(hd + 1)]) : 0);
#endif
       if
       :: sp == 0 || hd + sp > t - 1 -> held = c; fits = 0; break
       :: else -> hd = hd + sp
       fi
    od;
    c = 0; sp = 0
  }
}

/* the ghost fate of every message of the chain led by w */
inline chain_fate(f) {
  c = w + 1;
  do
  :: c != 0 -> fate[cid[c - 1]] = f; c = cnext[c - 1]
  :: else -> break
  od
}

/* commit(): the tail is locked at t by writer w, leading the chain from cell w + 1
 * (a lone message: the chain is just its cell). res: DONE, DROPPED, or 9 = retry. */
inline commit() {
  atomic {
    need = ntot[w]; cnt = ctot[w];                    /* Q8 */
    hd = head; oldhd = hd;                            /* H2 */
    nt = t + need; fits = 1; held = 0
#ifdef MUTANT_DROP_RESTORE_LATE
    ; saved = RC(t - 1); WSTORE(t - 1, FF)            /* W1 first, as HAProxy */
    SPLIT owner_saved = saved                         /* W7 */
#endif
  };
  reclaim();
  if
  :: !fits ->
     atomic {                                         /* wait_for_writer(head) */
       retry = 0;
       if
       :: held == FF ->
          if :: stuck_pos[PROC(w)] != hd -> stuck_pos[PROC(w)] = hd; stuck_n[PROC(w)] = 0 :: else -> skip fi;
          if :: stuck_n[PROC(w)] < WW -> stuck_n[PROC(w)]++; retry = 1 :: else -> skip fi
       :: else -> skip
       fi
     };
     if
     :: retry ->
        unlock_tail(t);                               /* as unlock_tail: L3, L4 */
        res = 9
     :: else ->
        atomic {                                      /* drop the whole batch */
          msgs_dropped = msgs_dropped + cnt;
          chain_fate(F_DROPPED)
        };
#if CHECKS
        if :: held != 0 -> recover_dead() :: else -> skip fi;   /* check_dead_periodic */
#endif
#ifdef MUTANT_DROP_RESTORE_LATE
        owner = 0; owner_saved = UNK;                 /* L3 */
        atomic { ASSERT_TAIL_RC(t); locked = 0; hold_proc = NONE };   /* L4 */
        atomic { WSTORE(t - 1, saved) };              /* restored after the tail */
#else
        unlock_tail(t);                               /* L3, L4: tail and RC untouched */
#endif
        atomic {                                      /* Q2: release the carried cells */
          c = cnext[w];
          do
          :: c != 0 -> fx = cnext[c - 1]; cstate[c - 1] = DROPPED; c = fx
          :: else -> break
          od;
          fx = 0
        };
        res = DROPPED
     fi
  :: else ->
     /* the holder carries the writers queued in its process meanwhile (Q12), as late as
      * possible: after its reclaim, before W1 */
     atomic { qx = qhead[PROC(w)]; qhead[PROC(w)] = 0 };   /* Q12 */
     if
     :: qx != 0 ->
        atomic { ntot[qx - 1] != NOTREADY -> qn = ntot[qx - 1]; qc = ctot[qx - 1] };   /* Q8 */
        hd2 = hd; nt = nt + qn;
#ifndef MUTANT_CARRY_NO_RECLAIM
        reclaim();
#endif
        if
        :: fits ->
           atomic {                                   /* the taken chain follows ours */
             need = need + qn; cnt = cnt + qc;
             c = w + 1;
             do
             :: cnext[c - 1] != 0 -> c = cnext[c - 1]
             :: else -> break
             od;
             cnext[c - 1] = qx; c = 0
           }
        :: else ->
           atomic {                                   /* no room for them: dropped alone */
             hd = hd2; nt = nt - qn; fits = 1; held = 0;
             msgs_dropped = msgs_dropped + qc;
             c = qx;
             do
             :: c != 0 -> fate[cid[c - 1]] = F_DROPPED; fx = cnext[c - 1]; cstate[c - 1] = DROPPED; c = fx   /* Q2 */
             :: else -> break
             od;
             c = 0; fx = 0
           }
        fi
     :: else -> skip
     fi;
     atomic { qx = 0; qn = 0; qc = 0; hd2 = 0 };
     atomic {
#ifndef MUTANT_DROP_RESTORE_LATE
       saved = RC(t - 1); WSTORE(t - 1, FF)           /* W1: exchange 0xFF (W6: always) */
       SPLIT owner_saved = saved                      /* W7 */
       SPLIT
#endif
       if :: hd != oldhd -> head = hd :: else -> skip fi   /* W2: head, fence(release) */
       SPLIT
       WSTORE(nt - 1, 0);                             /* W8: trailing RC */
       inf_saved[w] = saved; inf_end[w] = nt; inf_pos[w] = t;   /* W9 */
       gb_first[w] = norder; gb_n[w] = cnt; gb_pub[w] = 0
     };
#if CHECKS
     if :: recover_dead() :: skip fi;                 /* check_dead_periodic */
#endif
     atomic {
       owner = 0; owner_saved = UNK                   /* L3 */
#ifndef MUTANT_RELEASE_AFTER_COPY
       SPLIT                                          /* W3: tail = new_tail, unlocks */
       ASSERT_TAIL_RC(nt);
       tail = nt; locked = 0; hold_proc = NONE; gb_pub[w] = 1;
       c = w + 1;
       do
       :: c != 0 -> fate[cid[c - 1]] = F_ACCEPTED; order[norder] = cid[c - 1]; norder++; c = cnext[c - 1]
       :: else -> break
       od
#endif
     };
     pos = t - 1;
     c = w + 1;
     do
     :: c != 0 ->
        atomic {                                      /* copy one message */
          if :: pos != t - 1 -> WSTORE(pos, 0) :: else -> skip fi;   /* W10 */
          WSTORE(pos + 1, cid[c - 1]);
          if :: LENOF(cid[c - 1]) -> WSTORE(pos + 2, cid[c - 1]) :: else -> skip fi;
          pos = pos + 2 + LENOF(cid[c - 1]);
          fx = cnext[c - 1];                          /* Q9: wait_next */
          if :: c != w + 1 -> cstate[c - 1] = DONE :: else -> skip fi;   /* Q2 */
          c = fx; fx = 0
        }
     :: else -> break
     od;
#ifdef MUTANT_RELEASE_AFTER_COPY
     atomic {                                         /* W3 after the copy */
       ASSERT_TAIL_RC(nt);
       tail = nt; locked = 0; hold_proc = NONE; gb_pub[w] = 1;
       c = w + 1;
       do
       :: c != 0 -> fate[cid[c - 1]] = F_ACCEPTED; order[norder] = cid[c - 1]; norder++; c = cnext[c - 1]
       :: else -> break
       od
     };
#endif
     atomic {
       WSTORE(t - 1, saved);                          /* W4: expose the batch */
       xi = gb_first[w];
       do
       :: xi < gb_first[w] + gb_n[w] -> fate[order[xi]] = F_COMPLETE; xi++
       :: else -> break
       od;
       xi = 0
       SPLIT
       inf_pos[w] = 0; inf_end[w] = 0; inf_saved[w] = 0; gb_first[w] = 0; gb_n[w] = 0; gb_pub[w] = 0   /* W11 */
     };
     res = DONE
  fi;
  atomic { need = 0; cnt = 0; hd = 0; oldhd = 0; nt = 0; saved = 0; held = 0; pos = 0; fits = 0; retry = 0 }
}

proctype Writer(byte w) {
  byte k = 0, t, lt, o, need, cnt, hd, oldhd, nt, saved, held, c, sp, pos, res, prev, fp, xi, xj, fx, fe, fsp;
  byte qx, qn, qc, hd2;
  bool fits, retry, ok, unk_on = 0;
  byte unk_tail, unk_rec;
  {
    do
    :: k < MSGS ->
       atomic {                                       /* writev: the message and its cell */
         cid[w] = w * MSGS + k + 1;
         ntot[w] = NOTREADY; cnext[w] = 0; cstate[w] = WAITING
       };
       if
       :: atomic { !locked ->                         /* fast path or a contended try: L1 */
            locked = 1; t = tail; hold_proc = PROC(w);
            ntot[w] = 2 + LENOF(cid[w]); ctot[w] = 1 } ->
          owner = w + 1;                              /* L2 */
          commit()
       :: else ->
          atomic { prev = qhead[PROC(w)]; qhead[PROC(w)] = w + 1; cnext[w] = prev };  /* Q1, Q3 */
          atomic {                                    /* Q4: the older cell's total; Q5 */
            prev == 0 || ntot[prev - 1] != NOTREADY ->
            if
            :: prev == 0 -> ntot[w] = 2 + LENOF(cid[w]); ctot[w] = 1
            :: else -> ntot[w] = 2 + LENOF(cid[w]) + ntot[prev - 1]; ctot[w] = 1 + ctot[prev - 1]
            fi;
            prev = 0
          };
          do
          :: qhead[PROC(w)] != w + 1 -> res = WAITING; break   /* Q6: carried */
          :: atomic { qhead[PROC(w)] == w + 1 && !locked ->    /* L1 */
               locked = 1; t = tail; hold_proc = PROC(w) } ->
             owner = w + 1;                                     /* L2 */
             atomic {                                           /* Q7 */
               if
               :: qhead[PROC(w)] == w + 1 -> qhead[PROC(w)] = 0; ok = 1
               :: else -> ok = 0
               fi
             };
             if
             :: ok -> ok = 0; commit(); break
             :: else -> unlock_tail(t); res = WAITING; break    /* they lead now */
             fi
          :: OWNER_DEAD_SEEN; recover_dead_owner(o, lt, PROC(w))
          :: UNKNOWN_WATCH_START
          :: UNKNOWN_MATURED; recover_dead_owner(o, lt, PROC(w))
          od;
          if
          :: res == WAITING -> cstate[w] != WAITING; res = cstate[w]   /* Q10 */
          :: else -> skip
          fi
       fi;
       if
       :: res == 9 ->                                 /* commit_again */
          writer_waits++;
          do
          :: res == 9 -> lock_tail(PROC(w), w + 1); commit()
          :: else -> break
          od
       :: else -> skip
       fi;
       atomic {                                       /* the write returns; its cell dies */
         k++; res = 0; t = 0;
         cid[w] = 0; ntot[w] = 0; ctot[w] = 0; cnext[w] = 0; cstate[w] = 0
       }
    :: else -> break
    od;
    wover[w] = 1
  } unless { dead[PROC(w)] }
}

/* ---- the pinned reader (attached at head before the writers start) */

/* The move is done (R5, R6) and the message returned: it must be the next accepted
 * message that was not discarded (never lost nor duplicated). */
inline pinned_r5() {
  pos = q;
  rs_pos = q                                          /* R5 */
}
inline pinned_r6() {
  rs_next = 0;                                        /* R6 */
  q = 0;
  if
  :: hb < PAD0 ->
     do
     :: expect < norder && fate[order[expect]] == F_TORN -> expect++
     :: else -> break
     od;
     assert(expect < norder && order[expect] == hb);
     expect++
  :: else -> skip
  fi;
  hb = 0
}
proctype Pinned() {
  byte pos = 0, q, hb, expect = 0, t, lt, o, fp, xi, xj, fx, fe, fsp;
  bool ok, unk_on = 0, gave_up;
  byte unk_tail, unk_rec;
  {
    do
    :: atomic {                                       /* R1, R2: a whole message at pos */
         pos + 1 < tail && RC(pos) != FF ->
         hb = area[OFF(pos + 1)];
         /* framed: our position is held, nothing may have moved it */
         assert(SPANOF(hb) != 0 && pos + SPANOF(hb) < tail);
         /* the copy: a message (a pad is skipped), never torn */
         assert(hb >= PAD0 || !LENOF(hb) || area[OFF(pos + 2)] == hb);
         q = pos + SPANOF(hb)
       };
#ifdef MUTANT_READER_RELEASE_FIRST
       /* R4 before R3: for a moment the reader holds no RC byte */
       atomic { RC(pos) != FF -> if :: RC(pos) != 0 -> RC(pos) = RC(pos) - 1 :: else -> skip fi };
#endif
       rs_next = q + 1;                               /* R7 */
       gave_up = 0;
       if
       :: atomic { RC(q) != FF -> RC(q) = RC(q) + 1 } /* R3: protect the next position */
       :: atomic { RC(q) == FF && SOMEDEAD -> gave_up = 1 }   /* held long: maybe dead */
       fi;
       if
       :: gave_up ->
          gave_up = 0;
          rs_next = 0;
#ifndef MUTANT_READER_RELEASE_FIRST
          hb = 0;                                     /* not delivered: read again */
#endif
          lock_tail(PPIN, OWNX + PPIN);               /* check_dead_locked under the lock */
          recover_dead();
          unlock_tail(t);
          t = 0
#ifdef MUTANT_READER_RELEASE_FIRST
          ; atomic { RC(q) != FF -> RC(q) = RC(q) + 1 };
          atomic { pinned_r5() SPLIT pinned_r6() }
#endif
       :: else ->
          atomic {
#ifndef MUTANT_READER_RELEASE_FIRST
            RC(pos) != FF ->                          /* R4: then leave the old one */
            if :: RC(pos) != 0 -> RC(pos) = RC(pos) - 1 :: else -> skip fi
            SPLIT
#endif
            pinned_r5()
            SPLIT
            pinned_r6()
          }
       fi
    :: atomic { ALLOVER && (pos + 1 >= tail || RC(pos) == FF) -> break }
    od;
    /* nothing exposed is left unread when the writers are gone */
    atomic {
      do
      :: expect < norder && fate[order[expect]] == F_TORN -> expect++
      :: else -> break
      od;
      assert(expect == norder || fate[order[expect]] != F_COMPLETE);
      pin_done = 1
    }
  } unless { dead[PPIN] }
}

/* ---- the passive reader (writes nothing; starts at head). It copies a batch: one
 * message, or two when a second one is complete below the tail it loaded (fetch_passive's
 * walk; the choice stands for its byte limit), then re-checks head once (P2) against the
 * batch's start. */
proctype Passive() {
  byte pos = 0, hb, pb, sp, tv, q, hb2, pb2, sp2;
  do
  :: atomic {
       if
       :: pos < head -> pos = head; sp = 9            /* P1: lost bytes */
       :: else ->
          if
          :: pos + 1 < tail && RC(pos) != FF ->       /* R1, R2 */
             tv = tail;
             pv_on = 1; pv_pos = pos; pv_d1 = 0; pv_d2 = 0; sp = 1
          :: else -> sp = 0
          fi
       fi
     };
     if
     :: sp == 9 -> sp = 0
     :: sp == 0 ->
        if
        :: ALLOVER -> break
        :: else -> (pos + 1 < tail && RC(pos) != FF) || ALLOVER || head > pos
        fi
     :: sp == 1 ->
        atomic {                                      /* the frame and the copy */
          hb = area[OFF(pos + 1)];
          sp = SPANOF(hb);
          pb = ((sp == 3) -> area[OFF(pos + 2)] : hb)
        };
        atomic {                                      /* the walk goes on: R2 at the next */
          q = pos + sp;
          if
          :: sp != 0 && q + 1 < tv && RC(q) != FF ->
             pw_on = 1; pw_pos = q; pw_d1 = 0; pw_d2 = 0; sp2 = 1
          :: true -> sp2 = 0                          /* or the batch ends here */
          fi
        };
        if
        :: sp2 == 1 ->
           atomic {
             hb2 = area[OFF(q + 1)];
             sp2 = SPANOF(hb2);
             pb2 = ((sp2 == 3) -> area[OFF(q + 2)] : hb2)
           }
        :: else -> skip
        fi;
        atomic {
#ifndef MUTANT_PASSIVE_NO_RECHECK
          if
#ifndef MUTANT_PASSIVE_RECHECK_LAST
          :: head > pos -> skip                       /* P2: overwritten meanwhile: discard */
#else
          :: head > ((pw_on) -> q : pos) -> skip
#endif
          :: else ->
#else
          if
          :: true ->
#endif
             /* never returns a message overwritten while it copied */
             assert(!pv_d1 && !(sp == 3 && pv_d2));
             assert(sp != 0 && pos + sp < tail);
             assert(hb >= PAD0 || (pb == hb && fate[hb] == F_COMPLETE));
             pos = pos + sp;
             if
             :: pw_on ->
                assert(!pw_d1 && !(sp2 == 3 && pw_d2));
                assert(sp2 != 0 && q + sp2 < tv);
                assert(hb2 >= PAD0 || (pb2 == hb2 && fate[hb2] == F_COMPLETE));
                pos = pos + sp2
             :: else -> skip
             fi
          fi;
          pv_on = 0; pv_pos = 0; pv_d1 = 0; pv_d2 = 0; hb = 0; pb = 0; sp = 0;
          pw_on = 0; pw_pos = 0; pw_d1 = 0; pw_d2 = 0; hb2 = 0; pb2 = 0; sp2 = 0; q = 0; tv = 0
        }
     fi
  od;
  pas_done = 1
}

proctype Killer() {
  if
  :: (KILL & 1) -> dead[PA] = 1
  :: (KILL & 2) -> dead[PB] = 1
  :: (KILL & 4) -> dead[PC] = 1
  :: (KILL & 8) -> dead[PPIN] = 1
  :: skip
  fi
}

init {
  byte i;
  atomic {
    area[0] = 0;
#if PINNED
    rs_pid = 1; rs_pos = 0; pinned = 1; area[0] = 1;  /* R8..R11: attached at head */
    run Pinned();
#endif
#if PASSIVE
    run Passive();
#endif
    i = 0;
    do
    :: i < NW -> slot_pid[i] = 1; wproc[i] = PROC(i); run Writer(i); i++
    :: else -> break
    od;
    i = 0;
#if KILL
    run Killer()
#endif
  }
}

/* every write of a live process ends, and the readers with them (spin -a -f, with
 * -DLTL_DONE) */
#ifdef LTL_DONE
ltl done { <> (ALLOVER && (PINNED == 0 || pin_done || dead[PPIN]) && (PASSIVE == 0 || pas_done)) }
#endif
