// Package bytesize owns how Airlock shows a number of bytes to people:
// Format, in powers of 1024 with the IEC units (B, KiB, MiB, GiB).
//
// It uses the standard library only, so any package may import it; it
// must not import anything of Airlock's.
package bytesize

import "fmt"

// Format is n bytes for people: "512 B", "1.5 KiB", "20.0 MiB",
// "1.6 GiB" (one decimal from KiB up, GiB the largest unit), and "?" for
// a negative n (a size not known).
func Format(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
