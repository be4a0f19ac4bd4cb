package traces

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLexerRaw re-encodes documents through the lexer with tiny buffers
// fed one byte at a time (every token straddles a refill and the buffer
// moves under the parser) and compares with encoding/json's reading.
func TestLexerRaw(t *testing.T) {
	docs := map[string]string{
		"escapes":  `{"a\"b":"x\\y\u00e9\ud83d\ude00\n","n":[1,-2.5e3,true,false,null,{}],"e":[]}`,
		"nested":   `[[[[]]],{"k":{"k":{"k":"v"}}}]`,
		"numbers":  `[0,-0,1.5,1e10,1E-5,123456789012345678]`,
		"literals": `  [true , false ,null]  `,
	}
	for _, p := range []string{"testdata/kineto_two_steps.json", "testdata/jaeger_ui_download.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[p] = string(b)
	}
	for name, doc := range docs {
		for _, size := range []int{1, 2, 3, 7, 64} {
			t.Run(strings.ReplaceAll(name, "/", "_")+"/buf="+string(rune('0'+size%10)), func(t *testing.T) {
				lx := newLexer(iotest.OneByteReader(strings.NewReader(doc)))
				lx.buf = make([]byte, size)
				out, err := lx.raw(nil)
				if err != nil {
					t.Fatal(err)
				}
				var want, got any
				if err := json.Unmarshal([]byte(doc), &want); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("lexer output is not JSON: %v\n%s", err, out)
				}
				w, _ := json.Marshal(want)
				g, _ := json.Marshal(got)
				if !bytes.Equal(w, g) {
					t.Errorf("got  %s\nwant %s", g, w)
				}
			})
		}
	}
}

func TestLexerErrors(t *testing.T) {
	tests := map[string]string{
		"truncated string": `{"a":"abc`,
		"truncated object": `{"a":1`,
		"missing colon":    `{"a" 1}`,
		"bad literal":      `[tru]`,
		"bad escape":       `["\x"]`,
		"missing comma":    `[1 2]`,
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			lx := newLexer(strings.NewReader(doc))
			if _, err := lx.raw(nil); err == nil {
				t.Errorf("no error for %q", doc)
			}
		})
	}
}

// TestValidOpID compares the hand-written check with the grammar's regular
// expression on a table and on every string over a small alphabet.
func TestValidOpID(t *testing.T) {
	re := regexp.MustCompile(`^(L[0-9]{2,}\.[a-z0-9_]+\.[A-Za-z0-9_.\-]+|(embed|head|mtp)\.[A-Za-z0-9_.\-]+)$`)
	for _, id := range []string{"L07.attn.o_proj", "L07.attn.allreduce", "L07.moe.experts", "embed.allreduce", "head.lm_head",
		"mtp.L00.attn.q", "L7.attn.o", "L07.Attn.o", "L07..o", "L07.attn.", "L07.attn", "embed.", "layer seven", "", "L123.moe.x-y.z", "head.lm head"} {
		if got, want := ValidOpID(id), re.MatchString(id); got != want {
			t.Errorf("ValidOpID(%q) = %v, regexp says %v", id, got, want)
		}
	}
	alphabet := "L0.aA_ -"
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if got, want := ValidOpID(prefix), re.MatchString(prefix); got != want {
			t.Fatalf("ValidOpID(%q) = %v, regexp says %v", prefix, got, want)
		}
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 6)
}
