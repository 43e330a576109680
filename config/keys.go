package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Key is one config key as a user meets it: in the config file, as a flag
// and in the environment. Keys lists them from Config's struct tags, so the
// flags, the loader's list of known keys and docs/configuration.md all come
// from one place.
type Key struct {
	// Name is the key in the config file, dotted for nested keys;
	// "<name>" stands for a key of a map (clusters.<name>.version).
	Name string
	// Flag is the flag's name without its dashes, or "" when the key has
	// none: only top-level keys of plain values do.
	Flag string
	// Env is the environment variable, or "" for keys only a file can
	// write: lists of objects and keys under a map.
	Env string
	// Default is the default value as a user would write it; "" for none.
	Default string
	// Help is the key's one description.
	Help string
	// value is the key's default as a Go value.
	value reflect.Value
}

// mapKeyName stands for any key of a map in Key.Name.
const mapKeyName = "<name>"

// listEntry marks the fields of each entry of a list in Key.Name
// (ingest.eks[].cluster).
const listEntry = "[]"

// entryDefaults is a list entry with the defaults its WithDefaults method,
// if it has one, fills in.
func entryDefaults(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	if m := v.MethodByName("WithDefaults"); m.IsValid() && m.Type().NumIn() == 0 && m.Type().NumOut() == 1 && m.Type().Out(0) == t {
		return m.Call(nil)[0]
	}
	return v
}

// entryHasHelp reports whether a list entry's fields carry their own help,
// and so get a key each; prefix is the entries' key and "[].".
func entryHasHelp(t reflect.Type, prefix string) bool {
	for i := range t.NumField() {
		if fieldHelp(t.Field(i), prefix+t.Field(i).Tag.Get("mapstructure")) != "" {
			return true
		}
	}
	return false
}

// fieldHelp is the help of the key name, which field holds: its help tag
// in a section an input package declares, else this package's help.
func fieldHelp(f reflect.StructField, name string) string {
	if h := f.Tag.Get("help"); h != "" {
		return h
	}
	return help[name]
}

// Keys lists every config key, in Config's order, with the defaults of
// Default (Kafka's filled in, as the server fills them).
func Keys() []Key {
	d := Default()
	d.Kafka = d.Kafka.WithDefaults()
	return appendKeys(nil, reflect.ValueOf(d), "", true)
}

func appendKeys(out []Key, v reflect.Value, prefix string, topLevel bool) []Key {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		fv := v.Field(i)
		if opts == "squash" {
			// An embedded section's keys are its holder's.
			out = appendKeys(out, fv, prefix, topLevel)
			continue
		}
		if name == "" {
			continue
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
			out = appendKeys(out, fv, prefix+name+".", false)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = appendKeys(out, reflect.New(ft.Elem()).Elem(), prefix+name+"."+mapKeyName+".", false)
		default:
			k := Key{Name: prefix + name, Help: fieldHelp(f, prefix+name), Default: formatDefault(fv), value: fv}
			if shown, ok := f.Tag.Lookup("default"); ok {
				// A default the code fills in later, from another key.
				k.Default = shown
			}
			// Keys under a map or a list entry only a file can write; a
			// list of objects is a JSON array in the environment.
			objects := ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct
			if !strings.Contains(k.Name, mapKeyName) && !strings.Contains(k.Name, listEntry) {
				k.Env = envName(k.Name)
			}
			if topLevel && !objects {
				k.Flag = name
			}
			out = append(out, k)
			if objects && entryHasHelp(ft.Elem(), prefix+name+listEntry+".") {
				out = appendKeys(out, entryDefaults(ft.Elem()), prefix+name+listEntry+".", false)
			}
		}
	}
	return out
}

// envName is the environment variable of a key.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(key))
}

// formatDefault writes a default as a user would write it in the file.
func formatDefault(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return formatDefault(v.Elem())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = formatDefault(v.Index(i))
		}
		return strings.Join(parts, ", ")
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		if d, ok := v.Interface().(time.Duration); ok {
			return ShortDuration(d)
		}
		return strconv.FormatInt(v.Int(), 10)
	case reflect.String:
		return v.String()
	case reflect.Struct:
		return "" // a list entry's fields are described by its key's help
	case reflect.Map:
		if v.Len() == 0 {
			return ""
		}
	}
	panic(fmt.Sprintf("config: keys of kind %s have no format", v.Kind()))
}

// ShortDuration writes a duration as a user writes it in the config:
// 720h rather than time.Duration's 720h0m0s.
func ShortDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
