package fleet

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
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/hivelet/hivelet/internal/testutil"
)

func TestConnectAuthenticatesWithAnNKeySeedFile(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s := testutil.StartNATS(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	ctx := context.Background()
	// Control: without the seed the server refuses.
	if c, err := Connect(ctx, ConnConfig{URLs: []string{s.ClientURL()}, FailFast: true, RequestTimeout: time.Second}, nil, nil); err == nil {
		c.Close()
		t.Fatal("connected without credentials")
	}
	c, err := Connect(ctx, ConnConfig{URLs: []string{s.ClientURL()}, NKeySeedFile: seedFile, FailFast: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.State() != StateConnected {
		t.Fatalf("state %s", c.State())
	}
	if _, err := Connect(ctx, ConnConfig{URLs: []string{s.ClientURL()}, NKeySeedFile: filepath.Join(t.TempDir(), "missing.nk"), FailFast: true}, nil, nil); err == nil {
		t.Fatal("a missing seed file was accepted")
	}
}

// writeCert creates a key pair signed by parent (self-signed when parent is
// nil) and writes <name>.pem and <name>-key.pem into dir.
func writeCert(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func TestConnectVerifiesTheServerAndPresentsAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, caKey := writeCert(t, dir, "ca", &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	writeCert(t, dir, "server", &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)
	writeCert(t, dir, "client", &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "agent"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)

	srvCert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s := testutil.StartNATS(t, &server.Options{TLS: true, TLSVerify: true, TLSTimeout: 2,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	url := s.ClientURL()
	ctx := context.Background()
	caFile := filepath.Join(dir, "ca.pem")
	// Control: the CA alone is not enough when the server wants a client certificate.
	if c, err := Connect(ctx, ConnConfig{URLs: []string{url}, CAFile: caFile, FailFast: true, RequestTimeout: time.Second}, nil, nil); err == nil {
		c.Close()
		t.Fatal("connected without a client certificate")
	}
	c, err := Connect(ctx, ConnConfig{URLs: []string{url}, CAFile: caFile, CertFile: filepath.Join(dir, "client.pem"),
		KeyFile: filepath.Join(dir, "client-key.pem"), FailFast: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.State() != StateConnected {
		t.Fatalf("state %s", c.State())
	}
	if _, err := c.NATS().TLSConnectionState(); err != nil {
		t.Fatalf("not a TLS connection: %v", err)
	}
}
