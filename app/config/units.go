package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a byte count, written with a binary unit: 512M, 2G, 8GiB, 1.5G,
// 4096 (bytes). "none" (or -1) means no limit where a setting allows it;
// zero means not set. It reads from TOML strings and integers and is a
// pflag.Value, so flags and config files spell sizes the same way.
type Size int64

// Binary size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// Unlimited is the value of a Size or Duration set to "none".
const Unlimited = -1

// ParseSize reads a size: a number with an optional unit K, M, G or T
// (powers of 1024; "KiB", "KB", "k" are the same), or "none".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") || t == "-1" {
		return Unlimited, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult := Size(1)
	switch strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "b")) {
	case "":
	case "K", "KI":
		mult = KiB
	case "M", "MI":
		mult = MiB
	case "G", "GI":
		mult = GiB
	case "T", "TI":
		mult = TiB
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (want K, M, G or T, e.g. 2G)", s, unit)
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with a unit, e.g. 512M or 8G", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a number with a unit, e.g. 512M or 8G", s)
	}
	b := f * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(b), nil
}

// String writes the size in the largest unit that divides it.
func (s Size) String() string {
	switch {
	case s < 0:
		return "none"
	case s == 0:
		return "0"
	}
	for _, u := range []struct {
		n    Size
		name string
	}{{TiB, "T"}, {GiB, "G"}, {MiB, "M"}, {KiB, "K"}} {
		if s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Set implements pflag.Value.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// Type implements pflag.Value.
func (s *Size) Type() string { return "size" }

// UnmarshalTOML reads a string ("2G") or an integer (bytes).
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		return s.Set(v)
	case int64:
		if v < Unlimited {
			return fmt.Errorf("size %d is negative", v)
		}
		*s = Size(v)
		return nil
	}
	return fmt.Errorf("size: want a string such as \"2G\", not %T", v)
}

// MarshalText writes the size as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MiB is the size in whole MiB, rounded down.
func (s Size) MiB() int { return int(s / MiB) }

// Duration is a time.Duration written as Go writes one ("30m", "1h30m"),
// or "none" or "0" (no limit); the zero value means not set. It reads from TOML strings and
// is a pflag.Value.
type Duration time.Duration

// ParseDuration reads a duration; "none" and "0" are Unlimited.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") {
		return Unlimited, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit, e.g. 30m or 2h, or none", s)
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("duration %q is negative", s)
	case d == 0:
		return Unlimited, nil // as --timeout 0 always meant
	}
	return Duration(d), nil
}

func (d Duration) String() string {
	if d < 0 {
		return "none"
	}
	return time.Duration(d).String()
}

// Set implements pflag.Value.
func (d *Duration) Set(v string) error {
	n, err := ParseDuration(v)
	if err != nil {
		return err
	}
	*d = n
	return nil
}

// Type implements pflag.Value.
func (d *Duration) Type() string { return "duration" }

// UnmarshalTOML reads a string ("30m", "none").
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return errors.New(`duration: want a string such as "30m" or "none"`)
	}
	return d.Set(s)
}

// MarshalText writes the duration as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Std is the duration as a time.Duration; "none" is zero (no limit).
func (d Duration) Std() time.Duration {
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

// UnmarshalText reads what MarshalText wrote (JSON, sandbox.json).
func (s *Size) UnmarshalText(b []byte) error { return s.Set(string(b)) }

// UnmarshalText reads what MarshalText wrote (JSON, sandbox.json).
func (d *Duration) UnmarshalText(b []byte) error {
	if string(b) == "0s" {
		*d = 0
		return nil
	}
	return d.Set(string(b))
}
