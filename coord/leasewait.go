package coord

import "time"

// claimWait is what a claim saw of the turn that held its history while
// it waited, for the koe_coord_lease_wait_seconds metric and a log line
// that says why a turn started late.
type claimWait struct {
	began    time.Time // first found held; zero: never waited
	holder   string    // the holder last seen
	onExpiry bool      // the last pause was to end at the holder's lease expiry
	timedOut bool      // and it ended on its timer, not on a release
}

// look records that the history was held by holder.
func (w *claimWait) look(holder string) {
	if w.began.IsZero() {
		w.began = time.Now()
	}
	w.holder = holder
}

// endedBy is how a wait that ended with the lease acquired ended: the
// holder released it, or the claim looked again at its expiry and found
// it gone.
func (w *claimWait) endedBy() string {
	if w.onExpiry && w.timedOut {
		return WaitExpired
	}
	return WaitReleased
}

// why explains an outcome in a log line.
var why = map[string]string{
	WaitReleased:  "the turn running there ended when asked to and released it",
	WaitExpired:   "the turn's lease expired: its instance stopped renewing it (cut off from redis, or an older koe without a heartbeat that died)",
	WaitTakenOver: "its instance's heartbeat had expired: the instance died, and its lease was taken over",
	WaitStopped:   "the claim ended without the history: a newer turn claimed it, the caller went away, or coord.wait ran out",
}

// waitEnded reports a claim's wait for a held history, if it waited.
func (r *RedisCoordinator) waitEnded(w *claimWait, history, outcome string) {
	if w.began.IsZero() {
		return
	}
	d := time.Since(w.began)
	r.obs.get().LeaseWait(outcome, d)
	if d >= slowClaim {
		r.log.Warn("a turn waited for its history", "history_uid", history, "waited", d.Round(time.Millisecond),
			"outcome", outcome, "why", why[outcome], "holder_instance", instanceOfLease(w.holder))
	}
}
