package manifest

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Encode writes the effective manifest (defaults applied, paths expanded)
// as TOML that Parse reads back to the same Manifest.
func (m *Manifest) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if m.Source != "" {
		// A newline in the source name must not end the comment.
		src := strings.NewReplacer("\n", " ", "\r", " ").Replace(m.Source)
		fmt.Fprintf(bw, "# effective manifest, read from %s\n\n", src)
	}
	if err := toml.NewEncoder(bw).Encode(m); err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}
