package main

import (
	"net/http"
	"os"
)

// envAuthToken is koe's own variable for server.auth_token; -token
// defaults to it, so that the token need not be on a command line that
// every user of the machine can read in ps.
const envAuthToken = "KOE_AUTH_TOKEN"

// authToken is -token, or else KOE_AUTH_TOKEN.
func (o options) authToken() string {
	if o.token != "" {
		return o.token
	}
	return os.Getenv(envAuthToken)
}

// dialHeader is what every WebSocket koe-load opens sends: koe's token,
// when there is one, as "Authorization: Bearer" (nginx passes it on).
func (o options) dialHeader() http.Header {
	tok := o.authToken()
	if tok == "" {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + tok}}
}
