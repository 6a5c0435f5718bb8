package protocol

// Watching: a connection to /client-ws?watch=CLIENT_UID or
// ?watch_conf=CONF_UID receives what a session says without being able to
// say anything (an OBS overlay, a second screen).

// WatchTarget names what a watcher follows: exactly one field is set.
type WatchTarget struct {
	ClientUID string // a connection, across its reconnects
	ConfUID   string // a character, in every session
}

func (t WatchTarget) String() string {
	if t.ClientUID != "" {
		return "client " + t.ClientUID
	}
	return "character " + t.ConfUID
}

// MaxClientUIDLen bounds a client_uid a client chooses.
const MaxClientUIDLen = 64

// ValidClientUID reports whether a client may choose uid as its
// client_uid (to be followed across reconnects): 1-64 letters, digits,
// '-' or '_'.
func ValidClientUID(uid string) bool {
	if uid == "" || len(uid) > MaxClientUIDLen {
		return false
	}
	for _, r := range uid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
