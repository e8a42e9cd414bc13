package telemetry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

// writePEM writes blocks of kind to a file in dir and returns its path.
func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientCertificate makes a self-signed client certificate and its key.
func clientCertificate(t *testing.T) (*x509.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "tollgate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return cert, der, keyDER
}

// exportOneSpan turns tracing on as env says, ends one sampled span, flushes, and returns the
// number of spans dropped.
func exportOneSpan(t *testing.T, env map[string]string) int64 {
	t.Helper()
	s, err := Resolve(config.Telemetry{}, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Int64
	tr, err := Start(context.Background(), s, Options{OnDrop: func(_ string, n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	_, span := Tracer().Start(context.Background(), "one")
	span.End()
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dropped.Load()
}

// TestExportOverTLS: OTEL_EXPORTER_OTLP_CERTIFICATE names the roots a backend's certificate is
// checked against (without it, a private CA's backend is refused and the span counted as
// dropped), and OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY the certificate shown
// to a backend that asks for one (mutual TLS).
func TestExportOverTLS(t *testing.T) {
	dir := t.TempDir()
	clientCert, clientDER, clientKey := clientCertificate(t)
	var received atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { received.Add(1) }))
	clientRoots := x509.NewCertPool()
	clientRoots.AddCert(clientCert)
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: clientRoots}
	srv.StartTLS()
	defer srv.Close()
	serverCA := writePEM(t, dir, "server.pem", "CERTIFICATE", srv.Certificate().Raw)
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientDER)
	keyFile := writePEM(t, dir, "client-key.pem", "PRIVATE KEY", clientKey)
	endpoint := srv.URL

	if n := exportOneSpan(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}); n != 1 || received.Load() != 0 {
		t.Errorf("an unknown authority: %d dropped, %d received; want 1 dropped, none received", n, received.Load())
	}
	if n := exportOneSpan(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA}); n != 0 || received.Load() != 1 {
		t.Errorf("the backend's CA named: %d dropped, %d received; want none dropped, 1 received", n, received.Load())
	}

	srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert // the listener reads srv.TLS for each connection
	if n := exportOneSpan(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA}); n != 1 || received.Load() != 1 {
		t.Errorf("no client certificate for a backend that wants one: %d dropped, %d received; want 1 dropped, 1 received", n, received.Load())
	}
	if n := exportOneSpan(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA,
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile}); n != 0 || received.Load() != 2 {
		t.Errorf("mutual TLS: %d dropped, %d received; want none dropped, 2 received", n, received.Load())
	}
	if _, err := Resolve(config.Telemetry{}, envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile})); err == nil {
		t.Error("a client certificate without its key was accepted")
	}
	s, _ := Resolve(config.Telemetry{}, envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CERTIFICATE": keyFile}))
	if _, err := Start(context.Background(), s, Options{}); err == nil {
		t.Error("a certificate file holding no certificate was accepted")
	}
	s, _ = Resolve(config.Telemetry{}, envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA}))
	if _, err := Start(context.Background(), s, Options{}); err == nil || !strings.Contains(err.Error(), "not https") {
		t.Errorf("certificates for an http endpoint: %v, want a refusal", err)
	}
}
