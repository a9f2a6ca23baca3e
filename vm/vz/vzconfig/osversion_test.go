package vzconfig

import "testing"

func TestOSVersion(t *testing.T) {
	tests := []struct {
		in        string
		want      OSVersion
		atLeast14 bool
		bad       bool
	}{
		{in: "14", want: OSVersion{14, 0, 0}, atLeast14: true},
		{in: "13.6.1", want: OSVersion{13, 6, 1}},
		{in: "14.2.1\n", want: OSVersion{14, 2, 1}, atLeast14: true},
		{in: "26.1", want: OSVersion{26, 1, 0}, atLeast14: true},
		{in: "", bad: true},
		{in: "14.x", bad: true},
		{in: "1.2.3.4", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseOSVersion(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseOSVersion(%q) accepted", tt.in)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOSVersion(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if got.AtLeast(SaveMacOS) != tt.atLeast14 {
			t.Errorf("%v.AtLeast(14) = %v", got, !tt.atLeast14)
		}
	}
	if !(OSVersion{13, 0, 0}).AtLeast(MinMacOS) || (OSVersion{12, 9, 9}).AtLeast(MinMacOS) {
		t.Error("AtLeast(MinMacOS) is wrong around 13.0")
	}
	if s := (OSVersion{14, 2, 1}).String(); s != "14.2.1" {
		t.Errorf("String = %q", s)
	}
}
