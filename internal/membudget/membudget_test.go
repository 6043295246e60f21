package membudget

import (
	"os"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/foldertest"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1", want: 1},
		{in: "512", want: 512},
		{in: "4G", want: 4_000_000_000},
		{in: "4g", want: 4_000_000_000},
		{in: "4GB", want: 4_000_000_000},
		{in: "512M", want: 512_000_000},
		{in: "1.5G", want: 1_500_000_000},
		{in: "2k", want: 2000},
		{in: "3T", want: 3_000_000_000_000},
		{in: "4Gi", want: 4 << 30},
		{in: "512Mi", want: 512 << 20},
		{in: "1KiB", want: 1024},
		{in: "8E", want: 8_000_000_000_000_000_000},
		{in: " 6G ", want: 6_000_000_000},
		{in: "0", err: "at least 1 byte"},
		{in: "-4G", err: "at least 1 byte"},
		{in: "0.1", err: "at least 1 byte"},
		{in: "10E", err: "more than"},
		{in: "8Ei", err: "more than"},
		{in: "4X", err: "want a number"},
		{in: "G", err: "want a number"},
		{in: "", err: "want a number"},
		{in: "1e9", err: "want a number"},
		{in: "Inf", err: "want a number"},
		{in: "NaN", err: "want a number"},
		{in: "0x10", err: "want a number"},
		{in: "4i", err: `"i" follows a unit`},
		{in: "auto", err: "want a number"},
	} {
		got, err := ParseBytes(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseBytes(%q) = %d, %v; want an error saying %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 bytes"},
		{999, "999 bytes"},
		{1000, "1.0 kB"},
		{1500, "1.5 kB"},
		{999_960, "1.0 MB"},
		{6_000_000_000, "6.0 GB"},
		{2_400_000_000_000, "2.4 TB"},
		{9_223_372_036_854_775_807, "9.2 EB"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.in >= 1000 && tc.in < 1e18 { // what Format writes, ParseBytes reads back within its rounding
			s := strings.ReplaceAll(strings.ReplaceAll(Format(tc.in), " ", ""), "kB", "K")
			if b, err := ParseBytes(s); err != nil || b < tc.in*9/10 || b > tc.in*11/10 {
				t.Errorf("ParseBytes(%q) = %d, %v; want about %d", s, b, err, tc.in)
			}
		}
	}
}

// root writes the files of a fake system root and returns it.
func root(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	foldertest.Write(t, dir, files)
	return dir
}

// TestDetect reads fake roots: the smallest source wins, unreadable or
// unlimited ones are skipped, and the cgroups above the process's count.
func TestDetect(t *testing.T) {
	meminfo := "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
	status := "Name:\ttrain\nVmPeak:\t 2000000 kB\nVmSize:\t 1000000 kB\n"
	limit := func(v uint64) func() (uint64, bool) { return func() (uint64, bool) { return v, true } }
	for _, tc := range []struct {
		name  string
		files map[string]string
		as    func() (uint64, bool)
		want  Budget
		none  bool
	}{
		{name: "nothing", none: true},
		{name: "meminfo", files: map[string]string{"proc/meminfo": meminfo}, want: Budget{20_480_000_000, "MemAvailable"}},
		{name: "rlimit less VmSize", files: map[string]string{"proc/meminfo": meminfo, "proc/self/status": status}, as: limit(6_000_000_000),
			want: Budget{6_000_000_000 - 1_024_000_000, "RLIMIT_AS"}},
		{name: "rlimit unlimited", files: map[string]string{"proc/meminfo": meminfo}, as: func() (uint64, bool) { return 0, false },
			want: Budget{20_480_000_000, "MemAvailable"}},
		{name: "cgroup v2", files: map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max": "max\n", "sys/fs/cgroup/a/memory.max": "3000000000\n", "sys/fs/cgroup/a/memory.current": "1000000000\n"},
			want: Budget{2_000_000_000, "cgroup memory.max"}},
		{name: "cgroup v2 at the root", files: map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "4000000000\n"},
			want: Budget{4_000_000_000, "cgroup memory.max"}},
		{name: "cgroup v2 file cache", files: map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "4000000000\n", "sys/fs/cgroup/memory.current": "3500000000\n",
			"sys/fs/cgroup/memory.stat": "anon 500000000\nfile 3000000000\nactive_file 1000000000\ninactive_file 2000000000\n"},
			want: Budget{2_500_000_000, "cgroup memory.max"}},
		{name: "cgroup v1", files: map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/job\n0::/\n",
			"sys/fs/cgroup/memory/job/memory.limit_in_bytes": "5000000000\n", "sys/fs/cgroup/memory/job/memory.usage_in_bytes": "700000000\n",
			"sys/fs/cgroup/memory/job/memory.stat":       "cache 300000000\ninactive_file 1\ntotal_inactive_file 200000000\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
			want: Budget{4_500_000_000, "cgroup memory.limit_in_bytes"}},
		{name: "cgroup v1 unlimited", files: map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/job\n",
			"sys/fs/cgroup/memory/job/memory.limit_in_bytes": "9223372036854771712\n"},
			want: Budget{20_480_000_000, "MemAvailable"}},
		{name: "garbage", files: map[string]string{"proc/meminfo": "MemAvailable: lots\n", "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "big\n"}, none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Sources{Root: root(t, tc.files), AddressLimit: tc.as}
			got, ok := s.Detect()
			if ok == tc.none || (ok && got != tc.want) {
				t.Errorf("Detect() = %v, %v; want %v, %v", got, ok, tc.want, !tc.none)
			}
		})
	}
	if _, ok := (Sources{}).Detect(); ok {
		t.Error("the zero Sources found a budget")
	}
}

// TestSystem checks that this process's sources read: where the system
// has /proc/meminfo, there is a positive budget.
func TestSystem(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	b, ok := Detect()
	if !ok || b.Bytes <= 0 || b.Source == "" {
		t.Errorf("Detect() = %v, %v; want a positive budget", b, ok)
	}
	t.Logf("this process may take %v", b)
}
