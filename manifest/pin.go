package manifest

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// PinSHA256 returns data with sha256 = "SUM" set in the [[models]] block
// whose file is file. Only that value changes (or one line is added after
// the block's size line), so the user's comments, order and layout stay as
// they wrote them.
func PinSHA256(data []byte, file, sum string) ([]byte, error) {
	if !IsSHA256(sum) {
		return nil, fmt.Errorf("pin %s: sha256 must be 64 hex characters, got %q", file, sum)
	}
	sum = strings.ToLower(sum)
	i, err := modelIndex(data, file)
	if err != nil {
		return nil, fmt.Errorf("pin %s: %w", file, err)
	}
	x := indexKeys(data)
	quoted := `"` + sum + `"`
	var out []byte
	if loc, ok := x.at[modelPath(i, "sha256").String()]; ok {
		out = splice(data, loc.start, loc.end, quoted)
	} else {
		model, ok := x.at[modelPath(i).String()]
		if !ok || !strings.HasPrefix(string(data[model.off:min(model.off+2, len(data))]), "[[") {
			return nil, fmt.Errorf("pin %s: models[%d] is not a [[models]] block; add sha256 = %s by hand", file, i, quoted)
		}
		anchor := model
		for _, key := range []string{"size", "file"} {
			if loc, ok := x.at[modelPath(i, key).String()]; ok {
				anchor = loc
				break
			}
		}
		out = insertLineAfter(data, anchor, "sha256 = "+quoted)
	}
	// The edit is textual, so check that the file still says what we meant.
	j, err := modelIndex(out, file)
	if err != nil {
		return nil, fmt.Errorf("pin %s: edit broke the manifest: %w", file, err)
	}
	if got := pinnedSum(out, j); got != sum {
		return nil, fmt.Errorf("pin %s: edit did not take (sha256 reads %q)", file, got)
	}
	return out, nil
}

type pinDoc struct {
	Models []struct {
		File   string `toml:"file"`
		SHA256 string `toml:"sha256"`
	} `toml:"models"`
}

// modelIndex returns the position of the one model whose file is file.
func modelIndex(data []byte, file string) (int, error) {
	var doc pinDoc
	if err := toml.Unmarshal(data, &doc); err != nil {
		return 0, decodeError("manifest", err)
	}
	found := -1
	for i, md := range doc.Models {
		if md.File != file {
			continue
		}
		if found >= 0 {
			return 0, fmt.Errorf("models[%d] and models[%d] both have file %q", found, i, file)
		}
		found = i
	}
	if found < 0 {
		return 0, fmt.Errorf("no [[models]] block with file = %q", file)
	}
	return found, nil
}

func pinnedSum(data []byte, i int) string {
	var doc pinDoc
	if err := toml.Unmarshal(data, &doc); err != nil || i >= len(doc.Models) {
		return ""
	}
	return doc.Models[i].SHA256
}

func splice(data []byte, start, end int, s string) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(s))
	out = append(out, data[:start]...)
	out = append(out, s...)
	return append(out, data[end:]...)
}

// insertLineAfter adds line, indented like the anchor's line, on the line
// after the one that holds the anchor's value.
func insertLineAfter(data []byte, anchor keyLoc, line string) []byte {
	lineStart := anchor.off
	for lineStart > 0 && data[lineStart-1] != '\n' {
		lineStart--
	}
	indent := lineStart
	for indent < len(data) && (data[indent] == ' ' || data[indent] == '\t') {
		indent++
	}
	at := len(data)
	if nl := strings.IndexByte(string(data[anchor.end:]), '\n'); nl >= 0 {
		at = anchor.end + nl + 1
	}
	eol := "\n"
	if at >= 2 && data[at-1] == '\n' && data[at-2] == '\r' {
		eol = "\r\n" // keep a CRLF file CRLF
	}
	ins := string(data[lineStart:indent]) + line + eol
	if at == len(data) && (len(data) == 0 || data[len(data)-1] != '\n') {
		ins = eol + ins
	}
	return splice(data, at, at, ins)
}
