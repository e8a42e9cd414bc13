package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// tlsConfig is the exporter's TLS configuration from the certificate files s names, nil when
// it names none (the system's roots, no client certificate).
func (s Settings) tlsConfig() (*tls.Config, error) {
	if s.CertificateFile == "" && s.ClientCertificateFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CertificateFile != "" {
		pem, err := os.ReadFile(s.CertificateFile)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %s holds no PEM certificate", s.CertificateFile)
		}
		cfg.RootCAs = roots
	}
	if s.ClientCertificateFile != "" {
		pair, err := tls.LoadX509KeyPair(s.ClientCertificateFile, s.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
