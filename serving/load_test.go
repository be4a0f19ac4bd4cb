package serving

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestLengths: the drawn lengths have the distribution's moments. Fixed:
// always the mean. Uniform (mean 1000, spread 0.5): integers in [500,
// 1500], mean 1000, standard deviation 1001/sqrt(12) = 289. Log-normal
// (mean 1000, coefficient of variation 0.8): sample mean and CV within 2
// and 5 % on 200,000 draws (rounding to integers moves them by far less).
func TestLengths(t *testing.T) {
	cases := []struct {
		name            string
		l               Lengths
		mean, std       float64
		lo, hi          int
		meanTol, stdTol float64
	}{
		{"fixed", Lengths{Mean: 777}, 777, 0, 777, 777, 0, 0},
		{"uniform", Lengths{Dist: Uniform, Mean: 1000, Spread: 0.5}, 1000, 1001 / math.Sqrt(12), 500, 1500, 0.01, 0.02},
		{"lognormal", Lengths{Dist: LogNormal, Mean: 1000, Spread: 0.8}, 1000, 800, 1, maxLengthTokens, 0.02, 0.05},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.l.validate("test"); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			const n = 200_000
			var sum, sq float64
			for i := 0; i < n; i++ {
				v := c.l.draw(r)
				if v < c.lo || v > c.hi {
					t.Fatalf("draw %d outside [%d, %d]", v, c.lo, c.hi)
				}
				sum += float64(v)
				sq += float64(v) * float64(v)
			}
			mean := sum / n
			std := math.Sqrt(sq/n - mean*mean)
			if math.Abs(mean/c.mean-1) > c.meanTol {
				t.Errorf("mean %.1f, want %.1f within %.0f %%", mean, c.mean, 100*c.meanTol)
			}
			if c.std == 0 && std != 0 || c.std > 0 && math.Abs(std/c.std-1) > c.stdTol {
				t.Errorf("standard deviation %.1f, want %.1f within %.0f %%", std, c.std, 100*c.stdTol)
			}
		})
	}
}

// TestArrivals: gaps of the open-loop processes at 10 QPS over 100,000
// requests: mean 0.1 s for all; coefficient of variation 1 (Poisson), 0
// (constant), 1/sqrt(shape) for gamma (shape 0.25: 2; shape 4: 0.5);
// within 2 % (mean) and 3 % (CV).
func TestArrivals(t *testing.T) {
	cases := []struct {
		arrival Arrival
		shape   float64
		cv      float64
	}{
		{Poisson, 0, 1},
		{Constant, 0, 0},
		{Gamma, 0.25, 2},
		{Gamma, 4, 0.5},
	}
	for _, c := range cases {
		t.Run(string(c.arrival), func(t *testing.T) {
			tr := Traffic{QPS: 10, Arrival: c.arrival, Burstiness: c.shape, NumRequests: 100_000, Prompt: Lengths{Mean: 1}, Output: Lengths{Mean: 1}, Seed: 3}
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
			src := newSource(&tr)
			prev := -1.0
			var gaps []float64
			for {
				r, ok := src.next(0)
				if !ok {
					break
				}
				if prev >= 0 {
					gaps = append(gaps, r.ArrivalS-prev)
				}
				prev = r.ArrivalS
			}
			if len(gaps) != 99_999 {
				t.Fatalf("%d gaps, want 99,999", len(gaps))
			}
			var sum, sq float64
			for _, g := range gaps {
				sum += g
			}
			mean := sum / float64(len(gaps))
			for _, g := range gaps {
				sq += (g - mean) * (g - mean)
			}
			cv := math.Sqrt(sq/float64(len(gaps))) / mean
			if math.Abs(mean/0.1-1) > 0.02 {
				t.Errorf("mean gap %.5f s, want 0.1", mean)
			}
			if math.Abs(cv-c.cv) > 0.03*math.Max(c.cv, 1e-9) && !(c.cv == 0 && cv < 1e-6) {
				t.Errorf("coefficient of variation %.4f, want %.2f", cv, c.cv)
			}
		})
	}
}

// TestTrafficValidate: bad load is refused with the field named, before
// any work.
func TestTrafficValidate(t *testing.T) {
	ok := Lengths{Mean: 100}
	cases := []struct {
		name string
		t    Traffic
		want string
	}{
		{"no load", Traffic{NumRequests: 1, Prompt: ok, Output: ok}, "no load"},
		{"negative qps", Traffic{QPS: -1, NumRequests: 1, Prompt: ok, Output: ok}, "qps"},
		{"nan qps", Traffic{QPS: math.NaN(), NumRequests: 1, Prompt: ok, Output: ok}, "qps"},
		{"no end", Traffic{QPS: 1, Prompt: ok, Output: ok}, "neither a request count nor a duration"},
		{"bad arrival", Traffic{QPS: 1, Arrival: "zipf", NumRequests: 1, Prompt: ok, Output: ok}, "arrival"},
		{"bad burstiness", Traffic{QPS: 1, Arrival: Gamma, Burstiness: -2, NumRequests: 1, Prompt: ok, Output: ok}, "burstiness"},
		{"zero prompt", Traffic{QPS: 1, NumRequests: 1, Prompt: Lengths{}, Output: ok}, "prompt: mean 0"},
		{"spread on fixed", Traffic{QPS: 1, NumRequests: 1, Prompt: Lengths{Mean: 10, Spread: 0.5}, Output: ok}, "spread"},
		{"wide uniform", Traffic{QPS: 1, NumRequests: 1, Prompt: ok, Output: Lengths{Dist: Uniform, Mean: 10, Spread: 2}}, "output: uniform spread"},
		{"negative duration", Traffic{QPS: 1, DurationS: -1, Prompt: ok, Output: ok}, "duration"},
		{"bad trace request", Traffic{Requests: []Request{{ArrivalS: 0, PromptTokens: 0, OutputTokens: 1}}}, "prompt_tokens"},
		{"unsorted trace", Traffic{Requests: []Request{{ArrivalS: 2, PromptTokens: 1, OutputTokens: 1}, {ArrivalS: 1, PromptTokens: 1, OutputTokens: 1}}}, "arrival_s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.t.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate() = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// TestReadRequests: both formats, sorting, and errors that name the file,
// line and field.
func TestReadRequests(t *testing.T) {
	want := []Request{{ArrivalS: 0, PromptTokens: 100, OutputTokens: 10}, {ArrivalS: 0.5, PromptTokens: 20, OutputTokens: 2}, {ArrivalS: 1.25, PromptTokens: 3000, OutputTokens: 400}}
	good := []struct{ name, format, text string }{
		{"jsonl", "jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 100, \"output_tokens\": 10, \"id\": \"a\"}\n# comment\n\n" +
			"{\"arrival_s\": 1.25, \"prompt_tokens\": 3000, \"output_tokens\": 400}\n{\"prompt_tokens\": 20, \"output_tokens\": 2, \"arrival_s\": 0.5}\n"},
		{"csv", "csv", "output_tokens,arrival_s,model,prompt_tokens\n10,0,x,100\n400,1.25,x,3000\n2,0.5,y,20\n"},
		{"sniffed jsonl", "", "  {\"arrival_s\":0,\"prompt_tokens\":100,\"output_tokens\":10}\n{\"arrival_s\":0.5,\"prompt_tokens\":20,\"output_tokens\":2}\n{\"arrival_s\":1.25,\"prompt_tokens\":3000,\"output_tokens\":400}"},
		{"sniffed csv with BOM", "", "\ufeffarrival_s,prompt_tokens,output_tokens\r\n0,100,10\r\n0.5,20,2\r\n1.25,3000,400\r\n"},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadRequests(strings.NewReader(c.text), "req", c.format)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	bad := []struct {
		name, format, text string
		line               int
		field              string
	}{
		{"empty", "jsonl", "", 1, ""},
		{"not json", "jsonl", "{\"arrival_s\":0,\"prompt_tokens\":1,\"output_tokens\":1}\n{oops\n", 2, ""},
		{"missing field", "jsonl", "{\"arrival_s\":0,\"prompt_tokens\":1}\n", 1, "output_tokens"},
		{"string number", "jsonl", "{\"arrival_s\":\"0\",\"prompt_tokens\":1,\"output_tokens\":1}\n", 1, "arrival_s"},
		{"fractional tokens", "jsonl", "{\"arrival_s\":0,\"prompt_tokens\":1.5,\"output_tokens\":1}\n", 1, "prompt_tokens"},
		{"zero output", "jsonl", "{\"arrival_s\":0,\"prompt_tokens\":1,\"output_tokens\":0}\n", 1, "output_tokens"},
		{"negative arrival", "jsonl", "{\"arrival_s\":-1,\"prompt_tokens\":1,\"output_tokens\":1}\n", 1, "arrival_s"},
		{"missing column", "csv", "arrival_s,prompt_tokens\n0,1\n", 1, "output_tokens"},
		{"short row", "csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n0,1\n", 3, "output_tokens"},
		{"bad number", "csv", "arrival_s,prompt_tokens,output_tokens\n0,x,1\n", 2, "prompt_tokens"},
		{"infinite arrival", "csv", "arrival_s,prompt_tokens,output_tokens\ninf,1,1\n", 2, "arrival_s"},
		{"header only", "csv", "arrival_s,prompt_tokens,output_tokens\n", 1, ""},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadRequests(strings.NewReader(c.text), "req.x", c.format)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.File != "req.x" || pe.Line != c.line || pe.Field != c.field {
				t.Errorf("error %q at %s:%d field %q, want line %d field %q", err, pe.File, pe.Line, pe.Field, c.line, c.field)
			}
		})
	}
}

// FuzzReadRequests: any input parses to sorted, valid requests or a
// *ParseError; it never panics.
func FuzzReadRequests(f *testing.F) {
	for _, s := range []string{
		"{\"arrival_s\": 0, \"prompt_tokens\": 100, \"output_tokens\": 10}\n",
		"arrival_s,prompt_tokens,output_tokens\n0,1,1\n2,5,5\n1,3,3\n",
		"{\"arrival_s\": 1e308, \"prompt_tokens\": 16777216, \"output_tokens\": 1}",
		"arrival_s,prompt_tokens,output_tokens\n\"0\",\"1\",\"1\"\n",
		"{\"arrival_s\": null}",
		"a,b\n\"unterminated",
		"# only a comment\n",
		"{}\n[]\n",
	} {
		f.Add(s, "")
		f.Add(s, "csv")
		f.Add(s, "jsonl")
	}
	f.Fuzz(func(t *testing.T, text, format string) {
		if format != "" && format != "csv" && format != "jsonl" {
			format = ""
		}
		reqs, err := ReadRequests(strings.NewReader(text), "fuzz", format)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		if len(reqs) == 0 {
			t.Fatal("no requests and no error")
		}
		for i, r := range reqs {
			if err := r.validate(); err != nil {
				t.Fatalf("request %d invalid: %v", i, err)
			}
			if i > 0 && r.ArrivalS < reqs[i-1].ArrivalS {
				t.Fatalf("requests not sorted at %d", i)
			}
		}
	})
}

// TestShortenJSONNotJSON: a value that is not JSON (absent, or cut) is
// shown quoted as its bytes; it recursed without end, a stack overflow
// where a message wanted the value.
func TestShortenJSONNotJSON(t *testing.T) {
	for raw, want := range map[string]string{"": `""`, `{"a": `: `"{\"a\": "`, `[1, 2]`: `[1,2]`} {
		if got := shortenJSON([]byte(raw)); got != want {
			t.Errorf("shortenJSON(%q) = %s, want %s", raw, got, want)
		}
	}
}

// TestTrafficDraws: a load draws from its seed exactly where two seeds
// issue different requests: an open loop's Poisson or gamma gaps, lengths
// with a spread; not fixed lengths in a closed loop, constant arrivals of
// fixed lengths, a spread of 0, or a trace at its own times (simulate
// --seed was taken and printed for those). Each case's answer is checked
// against the requests two seeds issue.
func TestTrafficDraws(t *testing.T) {
	fixed := Lengths{Dist: Fixed, Mean: 1000}
	spread := Lengths{Dist: Uniform, Mean: 1000, Spread: 0.5}
	trace := []Request{{ArrivalS: 0, PromptTokens: 10, OutputTokens: 5}, {ArrivalS: 1.5, PromptTokens: 20, OutputTokens: 7}, {ArrivalS: 2, PromptTokens: 30, OutputTokens: 9}}
	for _, c := range []struct {
		name  string
		t     Traffic
		draws bool
	}{
		{"closed loop, fixed lengths", Traffic{Concurrency: 4, Prompt: fixed, Output: fixed}, false},
		{"closed loop, uniform prompts", Traffic{Concurrency: 4, Prompt: spread, Output: fixed}, true},
		{"closed loop, lognormal of spread 0", Traffic{Concurrency: 4, Prompt: Lengths{Dist: LogNormal, Mean: 1000}, Output: fixed}, false},
		{"poisson arrivals", Traffic{QPS: 2, Prompt: fixed, Output: fixed}, true},
		{"gamma arrivals", Traffic{QPS: 2, Arrival: Gamma, Burstiness: 0.5, Prompt: fixed, Output: fixed}, true},
		{"constant arrivals, fixed lengths", Traffic{QPS: 2, Arrival: Constant, Prompt: fixed, Output: fixed}, false},
		{"constant arrivals, uniform outputs", Traffic{QPS: 2, Arrival: Constant, Prompt: fixed, Output: spread}, true},
		{"a trace at its own times", Traffic{Requests: trace, Prompt: spread}, false},
		{"a trace at a poisson rate", Traffic{QPS: 2, Requests: trace}, true},
		{"a trace in a closed loop", Traffic{Concurrency: 2, Requests: trace}, false},
	} {
		if got := c.t.Draws(); got != c.draws {
			t.Errorf("%s: Draws() %v, want %v", c.name, got, c.draws)
		}
		issue := func(seed uint64) []Request {
			tr := c.t
			tr.Seed, tr.NumRequests = seed, 3
			src := newSource(&tr)
			var out []Request
			for {
				r, ok := src.next(0)
				if !ok {
					return out
				}
				out = append(out, r)
			}
		}
		if differ := !reflect.DeepEqual(issue(1), issue(2)); differ != c.draws {
			t.Errorf("%s: seeds 1 and 2 issue different requests: %v, want %v", c.name, differ, c.draws)
		}
	}
}
