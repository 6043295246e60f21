// Package membudget tells how much memory this process may still take,
// so that a size a flag or a file sets can be checked against it before
// anything is allocated: the smallest of the host's available memory
// (/proc/meminfo's MemAvailable), the address space RLIMIT_AS leaves
// (the limit less the process's VmSize) and what the process's cgroup
// leaves (memory.max less memory.current, or cgroup v1's
// memory.limit_in_bytes less memory.usage_in_bytes, the inactive file
// cache not counted as used, up its hierarchy). A source that cannot be
// read, or that sets no limit, is skipped.
//
// It also parses and prints sizes in bytes: ParseBytes reads "4G",
// "512M" or "1.5Gi", Format writes "2.4 TB".
package membudget

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Budget is an amount of memory and what set it.
type Budget struct {
	// Bytes is the memory left, in bytes.
	Bytes int64
	// Source names what set it: "MemAvailable", "RLIMIT_AS", "cgroup
	// memory.max" or "cgroup memory.limit_in_bytes", or, for a budget a
	// caller sets, what did (a flag's name).
	Source string
}

// String writes the budget as "6.0 GB (RLIMIT_AS)".
func (b Budget) String() string { return Format(b.Bytes) + " (" + b.Source + ")" }

// Sources are where Detect reads the limits. The zero Sources reads
// nothing; System returns this process's.
type Sources struct {
	// Root is the folder that holds proc and sys ("/" for the system's).
	Root string
	// AddressLimit returns RLIMIT_AS's soft limit, or ok false where there
	// is none (RLIM_INFINITY) or it cannot be read. Nil: none.
	AddressLimit func() (limit uint64, ok bool)
}

// System returns the sources of this process: the files under / and its
// RLIMIT_AS.
func System() Sources { return Sources{Root: "/", AddressLimit: addressLimit} }

// Detect returns the smallest budget of this process's sources (System),
// or ok false where none sets one.
func Detect() (b Budget, ok bool) { return System().Detect() }

// Detect returns the smallest budget of s's sources, or ok false where
// none sets one.
func (s Sources) Detect() (b Budget, ok bool) {
	for _, get := range []func() (Budget, bool){s.memAvailable, s.addressSpace, s.cgroup} {
		if c, has := get(); has && (!ok || c.Bytes < b.Bytes) {
			b, ok = c, true
		}
	}
	return b, ok
}

// path returns the file name under s.Root; "" where s has no root.
func (s Sources) path(name string) string {
	if s.Root == "" {
		return ""
	}
	return filepath.Join(s.Root, name)
}

// memAvailable reads MemAvailable from proc/meminfo.
func (s Sources) memAvailable() (Budget, bool) {
	kb, ok := s.field("proc/meminfo", "MemAvailable:")
	if !ok || kb > math.MaxInt64/1024 {
		return Budget{}, false
	}
	return Budget{Bytes: kb * 1024, Source: "MemAvailable"}, true
}

// addressSpace returns RLIMIT_AS less the process's VmSize (the address
// space it holds already, proc/self/status) where that can be read.
func (s Sources) addressSpace() (Budget, bool) {
	if s.AddressLimit == nil {
		return Budget{}, false
	}
	limit, ok := s.AddressLimit()
	if !ok || limit > math.MaxInt64 {
		return Budget{}, false
	}
	left := int64(limit)
	if kb, ok := s.field("proc/self/status", "VmSize:"); ok && kb <= math.MaxInt64/1024 {
		left = max(0, left-kb*1024)
	}
	return Budget{Bytes: left, Source: "RLIMIT_AS"}, true
}

// field returns the number after the line's name in the file under
// s.Root (a kB figure in meminfo and status files).
func (s Sources) field(file, name string) (int64, bool) {
	p := s.path(file)
	if p == "" {
		return 0, false
	}
	return fieldOf(p, name)
}

// fieldOf returns the number after the line's name (its start, with any
// separator) in the file at path.
func fieldOf(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, name); found {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			return v, err == nil && v >= 0
		}
	}
	return 0, false
}

// cgroup returns what the process's cgroup leaves: the smallest of
// limit less usage over its cgroup and those above it, cgroup v2's
// (memory.max, memory.current) or else v1's (memory.limit_in_bytes,
// memory.usage_in_bytes).
func (s Sources) cgroup() (Budget, bool) {
	if s.Root == "" {
		return Budget{}, false
	}
	v2, v1 := cgroupPaths(s.path("proc/self/cgroup"))
	if b, ok := s.cgroupLeft("sys/fs/cgroup", v2, "memory.max", "memory.current"); ok {
		return b, true
	}
	return s.cgroupLeft("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes")
}

// cgroupPaths returns the process's cgroup v2 path and its v1 memory
// cgroup's path from proc/self/cgroup ("/" where unknown).
func cgroupPaths(file string) (v2, v1 string) {
	v2, v1 = "/", "/"
	b, err := os.ReadFile(file)
	if err != nil {
		return v2, v1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case strings.Contains(","+f[1]+",", ",memory,"):
			v1 = f[2]
		}
	}
	return v2, v1
}

// cgroupLeft returns the smallest limit less usage of the cgroup rel of
// the hierarchy mounted at root (both under s.Root) and of those above
// it, up to root's own files, which a container reads as its cgroup's.
func (s Sources) cgroupLeft(root, rel, limitFile, usageFile string) (b Budget, ok bool) {
	top := s.path(root)
	d := filepath.Join(top, filepath.Clean("/"+rel))
	for {
		if left, has := cgroupFiles(d, limitFile, usageFile); has && (!ok || left < b.Bytes) {
			b, ok = Budget{Bytes: left, Source: "cgroup " + limitFile}, true
		}
		if d == top || !strings.HasPrefix(d, top) {
			return b, ok
		}
		d = filepath.Dir(d)
	}
}

// cgroupFiles returns the limit less the usage of one cgroup folder, or
// ok false where it sets no limit ("max", or v1's near-2^63 figure). The
// usage leaves out the inactive file cache (memory.stat's inactive_file,
// v1's total_inactive_file), which the kernel reclaims before it fails an
// allocation, as the working set that container runtimes report does.
func cgroupFiles(dir, limitFile, usageFile string) (int64, bool) {
	limit, err := readInt(filepath.Join(dir, limitFile))
	if err != nil || limit >= 1<<62 {
		return 0, false
	}
	usage, err := readInt(filepath.Join(dir, usageFile))
	if err != nil {
		usage = 0
	}
	for _, key := range []string{"total_inactive_file", "inactive_file"} { // v1 counts the subtree in total_
		if cache, ok := fieldOf(filepath.Join(dir, "memory.stat"), key+" "); ok {
			usage = max(0, usage-cache)
			break
		}
	}
	return max(0, limit-usage), true
}

// readInt reads a file holding one integer ("max" is an error).
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// units are the suffixes ParseBytes reads, by their power: k, M, G, T, P
// and E of 1000 each, Ki, Mi, Gi, Ti, Pi and Ei of 1024.
const units = "KMGTPE"

// ParseBytes reads a size in bytes: a number (a decimal fraction allowed)
// with an optional suffix K, M, G, T, P or E (powers of 1000, as Format
// writes them) or Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), the letter of
// either case, optionally followed by B: "4G" is 4,000,000,000 bytes,
// "512Mi" 536,870,912, "1.5GB" 1,500,000,000. It refuses a size below 1
// byte or above the largest int64.
func ParseBytes(s string) (int64, error) {
	num := strings.TrimSpace(s)
	num = strings.TrimSuffix(strings.TrimSuffix(num, "B"), "b")
	base, power := 1000.0, 0
	if strings.HasSuffix(num, "i") && len(num) > 1 {
		base, num = 1024, num[:len(num)-1]
	}
	if k := len(num); k > 0 {
		if i := strings.IndexByte(units, strings.ToUpper(num[k-1 : k])[0]); i >= 0 {
			power, num = i+1, num[:k-1]
		} else if base == 1024 {
			return 0, fmt.Errorf("size %q: \"i\" follows a unit (Ki, Mi, Gi, Ti)", s)
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || strings.ContainsAny(num, "eExXnN") { // no exponents, hex, Inf or NaN
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit K, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024): 4G, 512Mi", s)
	}
	b := v * math.Pow(base, float64(power))
	switch {
	case !(b >= 1):
		return 0, fmt.Errorf("size %q: want at least 1 byte", s)
	case b >= math.MaxInt64:
		return 0, fmt.Errorf("size %q: more than %d bytes", s, int64(math.MaxInt64))
	}
	return int64(math.Round(b)), nil
}

// Format writes a size in bytes for a message: "512 bytes", "1.5 kB",
// "6.0 GB", "2.4 TB", in powers of 1000 (as ParseBytes reads K, M, G, T).
func Format(b int64) string {
	if b < 1000 {
		return strconv.FormatInt(b, 10) + " bytes"
	}
	v, i := float64(b), -1
	for v >= 999.95 && i < len(units)-1 {
		v, i = v/1000, i+1
	}
	unit := string(units[i]) + "B"
	if i == 0 {
		unit = "kB"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}
