package tools

import (
	"strings"
	"testing"
	"time"
)

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string // "" = valid
	}{
		{Config{}, ""},
		{Config{Enabled: []string{"calculator", "get_current_datetime"}, Timeout: time.Second}, ""},
		{Config{Enabled: []string{"calculater"}}, `tools.enabled: unknown tool "calculater"`},
		{Config{Enabled: []string{"calculator", "calculator"}}, "tools.enabled: tool \"calculator\" is enabled twice"},
		{Config{Timeout: -time.Second}, "tools.timeout -1s is negative"},
		{Config{Enabled: []string{"calculator"}, MaxResultChars: 10}, "tools.max_result_chars 10 is out of range"},
		{Config{Enabled: []string{"calculator"}, Calculator: CalculatorSettings{MaxNodes: -1}}, "tools.calculator.max_nodes -1 is negative"},
		{Config{Enabled: []string{"get_weather"}, HTTP: HTTPSettings{MaxResponseBytes: -1}}, "tools.http.max_response_bytes -1 is negative (default 2097152)"},
		{Config{Enabled: []string{"get_weather"}, HTTP: HTTPSettings{UserAgent: "koe\r\nX-Evil: 1"}}, "tools.http.user_agent must be one line"},
		{Config{Enabled: []string{"get_weather"}, Weather: WeatherSettings{Units: "si"}}, `tools.weather.units "si" is neither metric nor imperial`},
		{Config{Enabled: []string{"get_weather"}, Weather: WeatherSettings{BaseURL: "open-meteo"}}, `tools.weather.base_url "open-meteo" is not an http or https URL`},
		{Config{Enabled: []string{"search_wikipedia"}, Wikipedia: WikipediaSettings{Language: "english"}}, ""},
		{Config{Enabled: []string{"search_wikipedia"}, Wikipedia: WikipediaSettings{Language: "en_GB"}}, `tools.wikipedia.language "en_GB" is not a Wikipedia language code`},
		{Config{Enabled: []string{"search_wikipedia"}, MaxDocumentChars: 99}, "tools.max_document_chars 99 is out of range: 0 (3000) or at least 100"},
		// A tool's settings matter once it is enabled.
		{Config{Enabled: []string{"calculator"}, Wikipedia: WikipediaSettings{Language: "EN"}}, ""},
	} {
		err := tc.c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	b, err := Config{Enabled: []string{"get_current_datetime"}}.Box(Options{})
	if err != nil || len(b.Specs()) != 1 || b.Specs()[0].Name != "get_current_datetime" {
		t.Errorf("Box: %v, %v", b, err)
	}
	if b, err := (Config{}).Box(Options{}); b != nil || err != nil {
		t.Errorf("no tools enabled: %v, %v", b, err)
	}
}
