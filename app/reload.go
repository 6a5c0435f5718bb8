package app

import "errors"

// Reload rereads what koe takes without a restart: its TLS certificate
// (server.tls_cert, server.tls_key). cmd/koe calls it on SIGHUP. A
// certificate that does not load is logged and the current one kept.
func (m *Main) Reload() error {
	if m.server == nil {
		return errors.New("reload: koe is not serving")
	}
	if m.kickRoots != nil {
		m.Logger.Info("reload asked (SIGHUP): the MCP servers' roots follow the character files")
		m.kickRoots()
	}
	if !m.server.TLS() {
		m.Logger.Info("reload asked (SIGHUP): koe rereads only its TLS certificate, and serves none (server.tls_cert is not set); nothing to do")
		return nil
	}
	m.Logger.Info("reload asked (SIGHUP): rereading the TLS certificate")
	return m.server.ReloadTLS()
}
