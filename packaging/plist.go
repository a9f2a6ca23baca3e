package packaging

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Plist values as ParsePlist returns them: map[string]any (dict), []any
// (array), string, bool, int64 (integer), float64 (real), time.Time (date)
// and []byte (data).

// ParsePlist reads an XML property list and returns its top-level value. It
// rejects what is not a well-formed plist: unknown elements, a dict key
// without a value or given twice, text where a value is expected.
func ParsePlist(r io.Reader) (any, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, errors.New("parse plist: no <plist> element")
		}
		if err != nil {
			return nil, fmt.Errorf("parse plist: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local != "plist" {
			return nil, fmt.Errorf("parse plist: top element is <%s>, want <plist>", se.Name.Local)
		}
		v, end, err := nextValue(d)
		if err != nil {
			return nil, fmt.Errorf("parse plist: %w", err)
		}
		if end {
			return nil, errors.New("parse plist: empty <plist>")
		}
		if _, end, err := nextValue(d); err != nil || !end {
			return nil, errors.New("parse plist: <plist> holds more than one value")
		}
		return v, nil
	}
}

// nextValue reads the next value element, skipping whitespace and
// comments; end is true when the enclosing element ends first.
func nextValue(d *xml.Decoder) (v any, end bool, err error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, false, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil, true, nil
		case xml.CharData:
			if strings.TrimSpace(string(t)) != "" {
				return nil, false, fmt.Errorf("unexpected text %q", strings.TrimSpace(string(t)))
			}
		case xml.StartElement:
			v, err := value(d, t)
			return v, false, err
		}
	}
}

func value(d *xml.Decoder, se xml.StartElement) (any, error) {
	switch se.Name.Local {
	case "dict":
		m := map[string]any{}
		for {
			k, end, err := nextValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return m, nil
			}
			key, ok := k.(plistKey)
			if !ok {
				return nil, fmt.Errorf("dict: want <key>, got a %T", k)
			}
			v, end, err := nextValue(d)
			if err != nil {
				return nil, fmt.Errorf("dict key %q: %w", key, err)
			}
			if end {
				return nil, fmt.Errorf("dict key %q has no value", key)
			}
			if _, ok := v.(plistKey); ok {
				return nil, fmt.Errorf("dict key %q has no value", key)
			}
			if _, dup := m[string(key)]; dup {
				return nil, fmt.Errorf("dict key %q given twice", key)
			}
			m[string(key)] = v
		}
	case "array":
		a := []any{}
		for {
			v, end, err := nextValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return a, nil
			}
			if _, ok := v.(plistKey); ok {
				return nil, errors.New("array: <key> outside a dict")
			}
			a = append(a, v)
		}
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, err
		}
		return se.Name.Local == "true", nil
	}
	var s string
	if err := d.DecodeElement(&s, &se); err != nil {
		return nil, err
	}
	switch se.Name.Local {
	case "key":
		return plistKey(s), nil
	case "string":
		return s, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %q: %w", s, err)
		}
		return n, nil
	case "real":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("real %q: %w", s, err)
		}
		return f, nil
	case "date":
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("date %q: %w", s, err)
		}
		return t, nil
	case "data":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown plist element <%s>", se.Name.Local)
}

// plistKey is a <key> while a dict is read; it never escapes ParsePlist.
type plistKey string
