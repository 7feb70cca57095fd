package manifest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// SetShimDir returns data with the top-level shim_dir set to dir, which is
// how guard install --shim-dir D is remembered by every later call. Only
// that value changes (or one line is added above the first key or table),
// so the user's comments and layout stay. dir is written as a TOML literal
// string; one holding a quote or a line break is refused.
func SetShimDir(data []byte, dir string) ([]byte, error) {
	if dir == "" || strings.ContainsAny(dir, "'\n\r") {
		return nil, fmt.Errorf("shim_dir %q cannot be written as a TOML literal string", dir)
	}
	value := "'" + dir + "'"
	var out []byte
	if loc, ok := indexKeys(data).at[path("shim_dir").String()]; ok {
		out = splice(data, loc.start, loc.end, value)
	} else {
		at, line := firstEntry(data), "shim_dir = "+value+"\n"
		if at == len(data) && at > 0 && data[at-1] != '\n' {
			line = "\n" + line // after a last comment line with no newline
		}
		out = splice(data, at, at, line)
	}
	var doc struct {
		ShimDir string `toml:"shim_dir"`
	}
	if err := toml.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("set shim_dir: %w", decodeError("manifest", err))
	}
	if doc.ShimDir != dir {
		return nil, fmt.Errorf("set shim_dir: the edit did not take (shim_dir reads %q)", doc.ShimDir)
	}
	return out, nil
}

// firstEntry is the offset of the first line that is neither blank nor a
// comment: a line added there is a top-level key, after the file's header
// comment.
func firstEntry(data []byte) int {
	off := 0
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		off = 3
	}
	for off < len(data) {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		line := bytes.TrimSpace(data[off : off+end])
		if len(line) > 0 && line[0] != '#' {
			return off
		}
		off += end + 1
	}
	return min(off, len(data))
}
