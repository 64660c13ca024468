package idem_test

// tls_test.go — Connect over TLS: a coordinator serving a certificate from a throwaway CA; the
// client verifies it with TLSRootFile (and refuses it without).

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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	idem "idem.dev/client"
	"idem.dev/client/internal/testcoord"
)

func writePEM(t *testing.T, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// makeCA writes ca.pem, server.pem and server.key (for 127.0.0.1 and "localhost") into dir.
func makeCA(t *testing.T, dir string) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idem test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, "server.key"), "EC PRIVATE KEY", keyDER)
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	makeCA(t, dir)
	co := testcoord.Spawn(t, "--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server.key"))
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	co.Dial = grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool}))
	co.WaitLeader(t, 20*time.Second)

	ctx := context.Background()
	c := connect(t, idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-tls"), TLSRootFile: filepath.Join(dir, "ca.pem")})
	rep, err := c.Run(ctx, idem.StepKey{GlobalID: "tls-1", Service: "pay", Operation: "charge"}, idem.RunOptions{}, succeed("over tls"))
	if err != nil || !rep.Ran {
		t.Fatalf("run over TLS: %+v %v", rep, err)
	}
	named := connect(t, idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-tls"), TLSRootFile: filepath.Join(dir, "ca.pem"), TLSServerName: "localhost"})
	if _, err := named.GetPolicy(ctx, "pay", "charge"); err != nil {
		t.Fatalf("TLSServerName localhost: %v", err)
	}
	// the system roots do not know this CA: refused, nothing runs
	untrusted := connect(t, idem.Options{Address: co.Addr, TLS: true, Deadline: time.Second})
	ran := false
	_, err = untrusted.Run(ctx, idem.StepKey{GlobalID: "tls-2", Service: "pay", Operation: "charge"}, idem.RunOptions{Deadline: 2 * time.Second},
		func(context.Context, idem.StepContext) idem.Result {
			ran = true
			return idem.Result{Outcome: idem.OutcomeSucceeded}
		})
	if err == nil || ran {
		t.Fatalf("an untrusted certificate was accepted (ran=%v)", ran)
	}
	// plaintext to a TLS server fails too
	plain := connect(t, idem.Options{Address: co.Addr, Deadline: time.Second})
	if _, err := plain.GetPolicy(ctx, "pay", "charge"); err == nil {
		t.Fatal("plaintext call to a TLS server succeeded")
	}
}
