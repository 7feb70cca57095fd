package state

import (
	"os"
	"strconv"
	"syscall"
)

// Identity is what must stay the same for guard to take a file as unchanged
// since it last looked at it, without reading it: both stamps (a binary's
// libraries, a model's sha256) hold one. A rebuilt or replaced file gets a
// new inode, size or mtime; ctime is part of it because cp -p, rsync -t and
// tar can rewrite a file in place with the old size and mtime, and nothing
// in user space can set ctime back.
type Identity struct {
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
}

// IdentityOf is the identity of the file fi describes (from a stat or an
// fstat); only the size and mtime where fi carries no stat_t.
func IdentityOf(fi os.FileInfo) Identity {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return IdentityOfStat(st)
	}
	return Identity{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
}

// IdentityOfStat is the identity a raw stat(2) reports, for the fast paths
// that stat without an os.FileInfo.
func IdentityOfStat(st *syscall.Stat_t) Identity {
	return Identity{
		Size:    st.Size,
		MtimeNS: st.Mtim.Nano(),
		CtimeNS: st.Ctim.Nano(),
		Dev:     uint64(st.Dev),
		Ino:     st.Ino,
	}
}

// String is the identity as one line of five numbers, for stamps written
// as text: "dev ino size mtime ctime".
func (id Identity) String() string {
	b := make([]byte, 0, 80)
	b = strconv.AppendUint(b, id.Dev, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, id.Ino, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, id.Size, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, id.MtimeNS, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, id.CtimeNS, 10)
	return string(b)
}
