package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{-1, "?"},
		{0, "0 B"},
		{1, "1 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{1 << 20, "1.0 MiB"},
		{20 << 20, "20.0 MiB"},
		{1<<30 - 1, "1024.0 MiB"},
		{1 << 30, "1.0 GiB"},
		{1717986918, "1.6 GiB"},
		{3 << 40, "3072.0 GiB"},
	} {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
