// Package live runs a character's live chat in koe: the audience's chat of
// a stream (Twitch) read into the character's live session, steered by the
// streamer over /api/live, and, with several instances sharing Redis, run
// by the one instance the others elect while they stand by, forward the
// streamer's commands to it and take over when it stops.
//
// It is a package of its own, next to livechat, on purpose. livechat is the
// platform client and the rules of a live chat (cleaning, filtering,
// queueing, pacing, framing the audience's words as quoted data); it
// imports nothing of koe, so those rules are tested without one and know
// no character. This package is where they meet koe: the character's live
// session (conversation's Live, whose turns yield to the streamer's own),
// what the character remembers of each viewer (recall), and the election
// among instances (coord's Leader, generic, stays in coord). app only
// builds it and hands it over to the server.
package live
