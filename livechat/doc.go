// Package livechat turns a live stream's chat into turns of a character.
//
// A Source (Twitch, read over IRC by a client in this package) delivers
// Messages to a Runner. The Runner cleans each message (control characters
// and line breaks removed, lengths cut), drops what the streamer does not
// want heard (blocklisted viewers, filtered words, bot commands, viewers
// over their per-minute share, messages moderators removed) and queues the
// rest up to a cap, dropping the oldest beyond it. Its single turn loop
// (Run) starts at most one turn at a time and at most max_per_minute per
// minute, folding up to max_batch waiting messages — all that arrived
// while the character spoke — into one turn text, one line per message
// (`viewer Alice says: "hi"`), preceded by what is remembered about each
// viewer when a ViewerNotes hook is given. The lines are framed as quoted
// data between <live_chat> and </live_chat>, which a viewer cannot close,
// and Instruction, for the live session's system prompt, tells the model
// they are not instructions. The streamer can Pause, Resume and Skip.
package livechat
