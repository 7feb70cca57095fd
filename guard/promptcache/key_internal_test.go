package promptcache

import "testing"

func TestKeyDependsOnFormatVersion(t *testing.T) {
	in := KeyInput{Tool: "llama-completion", ModelID: "m", Args: []string{"-p", "hi"}}
	if keyFor(FormatVersion, in) != Key(in) {
		t.Fatal("Key does not use FormatVersion")
	}
	if keyFor(FormatVersion+1, in) == Key(in) {
		t.Fatal("a new format version must change every key")
	}
}

func TestValidKey(t *testing.T) {
	good := Key(KeyInput{})
	bad := []string{"", "..", "../" + good[3:], good[:63], good + "0", "ABCDEF" + good[6:], "stats", ".tmp-1"}
	if !validKey(good) {
		t.Fatalf("validKey(%q) = false", good)
	}
	for _, k := range bad {
		if validKey(k) {
			t.Errorf("validKey(%q) = true", k)
		}
	}
}
