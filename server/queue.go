package server

import "context"

// frame is one queued message. ctx is the context of whoever sent it (a
// turn, or the connection): if it has ended by the time the writer gets to
// the frame, the frame is dropped, so a cancelled turn goes silent at once.
type frame struct {
	ctx  context.Context
	data []byte
	done chan error // nil unless the sender waits for the write
	// then, if set, runs in the writer once the frame is written or
	// dropped (a session's watchers get their copy then).
	then func()
}

func (f frame) finish(err error) {
	if f.done != nil {
		f.done <- err
	}
	if f.then != nil {
		f.then()
	}
}

// frameQueue is a first-in first-out ring of frames that takes memory only
// for what it holds: most connections are idle, with nothing queued, and
// one that had a burst gives the space back once it is drained. Its owner
// bounds its length and guards it.
type frameQueue struct {
	ring  []frame
	head  int // index of the oldest frame
	n     int // frames queued
	bytes int // their data
}

// keptQueueCap is the ring size a drained queue keeps, so that a trickle
// of single frames (one token at a time) does not allocate for each.
const keptQueueCap = 8

func (q *frameQueue) len() int { return q.n }

// size is the bytes of data queued.
func (q *frameQueue) size() int { return q.bytes }

func (q *frameQueue) push(f frame) {
	if q.n == len(q.ring) {
		grown := make([]frame, max(2*len(q.ring), 4))
		for i := range q.n {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = f
	q.n++
	q.bytes += len(f.data)
}

func (q *frameQueue) pop() (frame, bool) {
	if q.n == 0 {
		return frame{}, false
	}
	f := q.ring[q.head]
	q.ring[q.head] = frame{} // the frame's data belongs to the writer now
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	q.bytes -= len(f.data)
	if q.n == 0 {
		q.head = 0
		if len(q.ring) > keptQueueCap {
			q.ring = nil
		}
	}
	return f, true
}

// drain empties the queue and returns what it held, oldest first.
func (q *frameQueue) drain() []frame {
	out := make([]frame, 0, q.n)
	for {
		f, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}
