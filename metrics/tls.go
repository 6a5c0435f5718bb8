package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WatchCertificate exports koe_tls_certificate_expiry_seconds: the seconds
// until the certificate koe serves expires (negative once it has), read
// at each scrape, so that an alert can fire before a renewal that did not
// happen (or a SIGHUP that was not sent) turns clients away. notAfter
// gives the current certificate's end; ok false leaves the series out.
func (m *Metrics) WatchCertificate(notAfter func() (time.Time, bool)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "koe_tls_certificate_expiry_seconds",
		Help: "Seconds until the TLS certificate koe serves on its port (server.tls_cert) expires; negative once it has. Follows reloads (SIGHUP).",
	}, func() float64 {
		t, ok := notAfter()
		if !ok {
			return 0
		}
		return time.Until(t).Seconds()
	}))
}
