package main

import (
	"fmt"
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

// explainDial words a refused connection for the one who runs koe-load:
// gorilla's "bad handshake" does not say that koe wants its token.
func explainDial(err error, resp *http.Response) error {
	if err == nil || resp == nil {
		return err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%w: koe answered 401, it needs its server.auth_token: give -token or set %s", err, envAuthToken)
	}
	return fmt.Errorf("%w: HTTP %d", err, resp.StatusCode)
}
