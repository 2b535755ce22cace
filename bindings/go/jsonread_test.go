package stagger

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
)

// The fast JSON reader (jsonread.go) answers only where encoding/json would answer the same:
// every document below is decoded both ways, and wherever the reader answers, the answers
// must be equal (or encoding/json must fail too, which would be a bug).

// sessionDocuments are the metadata and report JSON of every conformance scenario after
// every step, and the metadata of a 5.5 MiB Metadata answer.
func sessionDocuments(t testing.TB) (metadata, reports [][]byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	eng, err := engineFor(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		s := loadConformance(t, path)
		in, err := newInstance(eng, s.Config, s.NowNs, s.Seed)
		if err != nil {
			t.Fatal(err)
		}
		var b batch
		for _, step := range s.Steps {
			b.reset()
			for _, e := range step.Events {
				if err := encodeEvent(&b, e); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := in.step(step.NowNs, b.bytes()); err != nil {
				t.Fatal(err)
			}
			md, err1 := in.metadataJSON()
			report, err2 := in.reportJSON()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			metadata, reports = append(metadata, md), append(reports, report)
		}
		in.close()
	}
	return append(metadata, bigMetadataJSON(t, eng)), reports
}

// bigMetadataJSON runs a one-shot refresh answered by the 5.5 MiB Metadata fixture.
func bigMetadataJSON(t testing.TB, eng *engine) []byte {
	t.Helper()
	apiVersions, big := fixture(t, "api_versions_v3.bin"), fixture(t, "metadata_v12_big.bin.gz")
	in, err := newInstance(eng, []byte(`{"seeds": ["b1:9092"], "one_shot": true}`), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	now := uint64(1)
	step := func(fill func(*batch)) actions {
		var b batch
		b.reset()
		fill(&b)
		now += 1000
		raw, err := in.step(now, b.bytes())
		if err != nil {
			t.Fatal(err)
		}
		acts, err := decodeActions(raw)
		if err != nil {
			t.Fatal(err)
		}
		return acts
	}
	conn := step(func(b *batch) { b.requestRefresh(CauseBootstrap, "") }).list[1].id
	acts := step(func(b *batch) { b.connected(conn) })
	for range 2 {
		sent := acts.list[0].data
		answer := append([]byte(nil), big...)
		if binary.BigEndian.Uint16(sent[4:]) == apiKeyApiVersions {
			answer = append([]byte(nil), apiVersions...)
		}
		copy(answer[4:8], sent[8:12])
		acts = step(func(b *batch) { b.received(conn, answer) })
	}
	md, err := in.metadataJSON()
	if err != nil || len(md) < 1<<20 {
		t.Fatalf("%d bytes of metadata JSON: %v", len(md), err)
	}
	return md
}

// variants are documents near doc that the reader must hand to encoding/json, or read alike:
// keys in another case, unknown keys, duplicate keys, escapes, nulls, other numbers, other
// whitespace, bytes after the end.
func variants(doc []byte) [][]byte {
	var out [][]byte
	replace := func(re string, with func([]byte) []byte) {
		pattern := regexp.MustCompile(re)
		locs := pattern.FindAllIndex(doc, 6)
		for _, loc := range locs {
			v := append(append(append([]byte(nil), doc[:loc[0]]...), with(doc[loc[0]:loc[1]])...), doc[loc[1]:]...)
			out = append(out, v)
		}
	}
	upper := func(b []byte) []byte { return bytes.ToUpper(b) }
	replace(`"[a-z_]+":`, upper)
	replace(`"[a-z]+_[a-z_]+":`, func(b []byte) []byte { return append([]byte(`"x`), b[1:]...) })
	replace(`\{`, func([]byte) []byte { return []byte(`{"extra": {"a": [1, -2.5e3, true, null, {"b": "\u00e9\n"}]}, `) })
	replace(`\{"`, func([]byte) []byte { return []byte(`{"name": "dup", "epoch": 7, "host": "h", "kind": "k", "id": 1, "`) })
	replace(`\{"[a-z_]+":[^,{}\[\]]+,`, func(b []byte) []byte { return append(b, b[1:]...) })
	replace(`"[a-z0-9:.\-]+"[,}]`, func(b []byte) []byte { return append([]byte(`"\u0041`), b[1:]...) })
	replace(`"[a-z0-9:.\-]+"[,}]`, func(b []byte) []byte { return append([]byte("\"\xc3\xa9"), b[1:]...) })
	replace(`"[a-z0-9:.\-]+"[,}]`, func(b []byte) []byte { return append([]byte("\"\xff"), b[1:]...) })
	replace(`:"[^"]*"`, func([]byte) []byte { return []byte(`:null`) })
	replace(`:-?[0-9]+`, func([]byte) []byte { return []byte(`:null`) })
	for _, n := range []string{`1.0`, `1e2`, `-0`, `-1`, `01`, `4294967296`, `99999999999999999999`, `1.5`, `-`, `2.`} {
		replace(`:[0-9]+`, func([]byte) []byte { return []byte(":" + n) })
		replace(`\[[0-9]+`, func([]byte) []byte { return []byte("[" + n) })
	}
	replace(`:(true|false)`, func([]byte) []byte { return []byte(`:"true"`) })
	replace(`:\[`, func([]byte) []byte { return []byte(`:[] , [`) })
	replace(`:\[\]`, func([]byte) []byte { return []byte(`:{}`) })
	replace(`,`, func([]byte) []byte { return []byte(" ,\n\t") })
	replace(`"attempts":\[`, func([]byte) []byte { return []byte(`"attempts":[{"reason": {"x": 1}},`) })
	replace(`"outcome":"[a-z_]+"`, func(b []byte) []byte { return append(b, `,"reason":"over\ttaken"`...) })
	out = append(out, append(append([]byte(" \r\n"), doc...), " \n"...), append(append([]byte(nil), doc...), " x"...),
		doc[:len(doc)/2], []byte(`null`), []byte(`[]`), []byte(`{}`), []byte(``), []byte(`{"brokers": []}`))
	return out
}

func checkMetadataReader(t *testing.T, doc []byte) bool {
	t.Helper()
	got, err := readMetadata(doc)
	want, wantErr := decodeMetadataJSON(doc)
	if err == nil && (wantErr != nil || !reflect.DeepEqual(got, want)) {
		t.Fatalf("the reader decodes %.300q\nas %+v,\nencoding/json as %+v (%v)", doc, got, want, wantErr)
	}
	if again, againErr := decodeMetadata(doc); !reflect.DeepEqual(again, want) || (againErr == nil) != (wantErr == nil) {
		t.Fatalf("decodeMetadata(%.300q) = %+v, %v; encoding/json: %+v, %v", doc, again, againErr, want, wantErr)
	}
	return err == nil
}

func checkReportReader(t *testing.T, doc []byte) bool {
	t.Helper()
	got, err := readReport(doc)
	want, ok := decodeReportJSON(doc)
	if err == nil && (!ok || !reflect.DeepEqual(got, want)) {
		t.Fatalf("the reader decodes %.300q\nas %+v,\nencoding/json as %+v (%v)", doc, got, want, ok)
	}
	if again, againOK := decodeReport(doc); !reflect.DeepEqual(again, want) || againOK != ok {
		t.Fatalf("decodeReport(%.300q) = %+v, %v; encoding/json: %+v, %v", doc, again, againOK, want, ok)
	}
	return err == nil
}

func TestTheFastJSONReaderAnswersAsEncodingJSONOrNotAtAll(t *testing.T) {
	metadata, reports := sessionDocuments(t)
	for name, c := range map[string]struct {
		docs  [][]byte
		check func(*testing.T, []byte) bool
	}{"metadata": {metadata, checkMetadataReader}, "report": {reports, checkReportReader}} {
		var read, slow, variantsRead int
		for _, doc := range c.docs {
			if string(doc) == "null" {
				continue
			}
			if !c.check(t, doc) {
				t.Errorf("%s: the reader passes the session's own document to encoding/json: %.300s", name, doc)
			}
			read++
			if len(doc) > 64<<10 {
				continue // its variants would be as big: the small ones cover the same forms
			}
			for _, v := range variants(doc) {
				if c.check(t, v) {
					variantsRead++
				} else {
					slow++
				}
			}
		}
		if read == 0 || slow == 0 || variantsRead == 0 {
			t.Errorf("%s: %d documents read, %d variants read, %d variants to encoding/json", name, read, variantsRead, slow)
		}
		t.Logf("%s: %d documents read; of their variants, %d read alike, %d to encoding/json", name, read, variantsRead, slow)
	}
}

func FuzzTheFastJSONReaders(f *testing.F) {
	metadata, reports := sessionDocuments(f)
	for _, doc := range append(metadata[:len(metadata)-1], reports...) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkMetadataReader(t, doc)
		checkReportReader(t, doc)
	})
}
