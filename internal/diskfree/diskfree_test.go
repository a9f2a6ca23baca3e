package diskfree

import "testing"

func TestBytes(t *testing.T) {
	if n := Bytes(t.TempDir()); n <= 0 {
		t.Errorf("Bytes of a temporary directory = %d, want the space left on its file system", n)
	}
	if n := Bytes("/nonexistent/airlock"); n != -1 {
		t.Errorf("Bytes of a missing directory = %d, want -1", n)
	}
}
