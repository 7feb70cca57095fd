package sign

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustGenerate(t *testing.T, name string) SecretKey {
	t.Helper()
	k, err := Generate(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerify(t *testing.T) {
	a, b := mustGenerate(t, "fleet-1"), mustGenerate(t, "fleet-2")
	impostor := mustGenerate(t, "fleet-1") // same name, another key
	msg := []byte("guard-stash-signature 1\nkey abc\n")
	trusted := []PublicKey{a.Public()}

	if name, err := Verify(msg, []string{a.Sign(msg)}, trusted); err != nil || name != "fleet-1" {
		t.Fatalf("good signature: %q %v", name, err)
	}
	// A good one among others that are not is enough.
	if _, err := Verify(msg, []string{"garbage", b.Sign(msg), a.Sign(msg)}, trusted); err != nil {
		t.Fatalf("good signature among others: %v", err)
	}
	cases := []struct {
		name    string
		msg     []byte
		sigs    []string
		trusted []PublicKey
		want    error
	}{
		{"no trusted keys", msg, []string{a.Sign(msg)}, nil, ErrNoTrust},
		{"unsigned", msg, nil, trusted, ErrUnsigned},
		{"unreadable signature", msg, []string{"fleet-1:not base64!"}, trusted, ErrUnsigned},
		{"unknown key", msg, []string{b.Sign(msg)}, trusted, ErrUnknownKey},
		{"same name, other key", msg, []string{impostor.Sign(msg)}, trusted, ErrBadSig},
		{"moved onto other bytes", []byte("guard-stash-signature 1\nkey abd\n"), []string{a.Sign(msg)}, trusted, ErrBadSig},
	}
	for _, c := range cases {
		if _, err := Verify(c.msg, c.sigs, c.trusted); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestParseRoundTrip(t *testing.T) {
	k := mustGenerate(t, "fleet-1")
	got, err := ParseSecret(k.String())
	if err != nil || !got.Key.Equal(k.Key) || got.Name != k.Name {
		t.Fatalf("secret key round trip: %v", err)
	}
	pub, err := ParsePublic(k.Public().String() + "\n")
	if err != nil || !pub.Key.Equal(k.Public().Key) {
		t.Fatalf("public key round trip: %v", err)
	}
	for _, bad := range []string{"", "fleet-1", ":AAAA", "a b:AAAA", "fleet-1:AAAA", k.String()} {
		if _, err := ParsePublic(bad); err == nil {
			t.Errorf("ParsePublic(%.30q) accepted", bad)
		}
	}
	// A secret key whose public half was altered is refused.
	raw := []byte(k.Key)
	raw[40] ^= 1
	if _, err := ParseSecret(SecretKey{Name: "x", Key: raw}.String()); err == nil {
		t.Error("ParseSecret accepted a key whose halves do not match")
	}
	if _, err := Generate("has:colon"); err == nil {
		t.Error("Generate accepted a name with a colon")
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stash.sec")
	k := mustGenerate(t, "fleet-1")
	if err := WriteSecretFile(p, k); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	got, err := ReadSecretFile(p)
	if err != nil || !got.Key.Equal(k.Key) {
		t.Fatalf("read back: %v", err)
	}
	if err := WriteSecretFile(p, mustGenerate(t, "other")); err == nil || !strings.Contains(err.Error(), "never replaces") {
		t.Fatalf("an existing key was replaced: %v", err)
	}
	if again, _ := ReadSecretFile(p); !again.Key.Equal(k.Key) {
		t.Fatal("the key file changed")
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(p); err == nil || !strings.Contains(err.Error(), "others can read it") {
		t.Fatalf("a key others can read was used: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSecretFile(p); err == nil || !strings.Contains(err.Error(), "another user") {
			t.Fatalf("another user's key was used: %v", err)
		}
	}
	link := filepath.Join(dir, "link.sec")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(link); err == nil {
		t.Fatal("a link to /dev/zero was read as a key")
	}
}

func FuzzParse(f *testing.F) {
	k, _ := Generate("fleet-1")
	f.Add(k.String())
	f.Add(k.Public().String())
	f.Add(k.Sign([]byte("x")))
	f.Add("fleet-1:")
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := ParsePublic(s); err == nil {
			if again, err := ParsePublic(p.String()); err != nil || !again.Key.Equal(p.Key) {
				t.Fatalf("public key %q does not round-trip", s)
			}
		}
		if sk, err := ParseSecret(s); err == nil && sk.Public().Key == nil {
			t.Fatal("secret key without a public half")
		}
		_, _ = Verify([]byte("x"), []string{s}, []PublicKey{k.Public()})
	})
}
