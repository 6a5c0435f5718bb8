// Package scene runs the streamer's all-character scenes: two or more
// characters talking with each other on a topic, a line each per round,
// through conversation's multi-character round (the one a group of
// clients talks through), each line an ordinary turn of the character's
// headless session, heard through its watchers (the OBS overlay). The
// streamer starts, pauses, resumes, skips a line and stops a scene over
// REST (server's Scenes); the live chat, when its character is in a
// scene, hands viewers' messages to the scene as lines (Viewers).
package scene
