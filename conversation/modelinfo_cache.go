package conversation

import (
	"encoding/json"
	"reflect"
	"sync/atomic"
	"unsafe"
)

// modelInfoUse is what sessions make of a character's model_info: the
// set-model-and-conf frame's copy, and the emotions the speech pieces are
// tagged with. Every session is greeted with that frame and every turn
// looks the emotions up; encoding the map (a Live2D model's nested
// description) anew for each greeting was half of a greeting's
// allocations. A character's model_info comes from its YAML and nothing
// changes it after, so what is made of it is kept, read-only, for the map
// last asked about: the one all sessions of the default character share.
// One entry, so that switching between characters loaded from files (each
// load makes new maps) keeps nothing more.
type modelInfoUse struct {
	m unsafe.Pointer // the map's identity; holding it keeps the map alive
	// frame is model_info as the frame carries it: its JSON encoding
	// (json.RawMessage, boxed once), or the map itself when it does not
	// encode, so that the frame fails as it did, with the reason.
	frame any
	// emotion maps each emotion keyword, lower case, to the model's
	// expression; keywords lists the keywords. Both are shared: read only.
	emotion  map[string]any
	keywords []string
}

var lastModelInfo atomic.Pointer[modelInfoUse]

// modelInfoOf returns what sessions make of m, made once per map.
func modelInfoOf(m map[string]any) *modelInfoUse {
	var id unsafe.Pointer
	if m != nil {
		id = reflect.ValueOf(m).UnsafePointer()
		if u := lastModelInfo.Load(); u != nil && u.m == id {
			return u
		}
	}
	u := &modelInfoUse{m: id, frame: m, emotion: emotionMap(m), keywords: emotionKeywords(m)}
	if m == nil {
		return u
	}
	data, err := json.Marshal(m)
	if err != nil {
		return u
	}
	u.frame = json.RawMessage(data)
	lastModelInfo.Store(u)
	return u
}
