package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"koe/agent"
)

// openMeteo is a fake of Open-Meteo's two hosts: the geocoding API and
// the forecast API, each answering with its handler.
func openMeteo(t *testing.T, geocode, forecast http.HandlerFunc) (geo, fc *recorder, opts Options) {
	t.Helper()
	geo = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/search" {
			http.NotFound(w, r)
			return
		}
		geocode(w, r)
	})
	fc = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/forecast" {
			http.NotFound(w, r)
			return
		}
		forecast(w, r)
	})
	return geo, fc, Options{Weather: WeatherSettings{BaseURL: fc.URL, GeocodingURL: geo.URL + "/"}}
}

func callWeather(t *testing.T, opts Options, args string) (string, error) {
	t.Helper()
	b := newBox(t, []string{"get_weather"}, opts)
	return b.Call(context.Background(), agent.ToolCall{Name: "get_weather", Arguments: args})
}

func TestWeather(t *testing.T) {
	geo, fc, opts := openMeteo(t, fixture(t, 200, "openmeteo/geocoding_berlin.json"), fixture(t, 200, "openmeteo/forecast_berlin.json"))
	got, err := callWeather(t, opts, `{"location":"  Berlin ","days":3}`)
	want := "Weather for Berlin, Land Berlin, Germany (local time 2026-01-15 14:00, Europe/Berlin)\n" +
		"Now: overcast, 3.1 °C, feels like -0.8 °C, humidity 81%, wind 13.3 km/h\n" +
		"Today, Thu 15 Jan: overcast, 0.4 to 4.2 °C, precipitation 0 mm\n" +
		"Fri 16 Jan: light rain, 1.9 to 5 °C, precipitation 4.3 mm\n" +
		"Sat 17 Jan: snow, -3.2 to 0.6 °C, precipitation 2.1 mm"
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	g := geo.got()
	if len(g) != 1 || g[0].method != "GET" {
		t.Fatalf("geocoding requests: %+v", g)
	}
	wantGeo := url.Values{"name": {"Berlin"}, "count": {"1"}, "language": {"en"}, "format": {"json"}}
	if !sameQuery(g[0].query, wantGeo) {
		t.Errorf("geocoding query %v, want %v", g[0].query, wantGeo)
	}
	f := fc.got()
	if len(f) != 1 {
		t.Fatalf("forecast requests: %+v", f)
	}
	wantForecast := url.Values{
		"latitude": {"52.52437"}, "longitude": {"13.41053"},
		"current":  {"temperature_2m,relative_humidity_2m,apparent_temperature,weather_code,wind_speed_10m"},
		"daily":    {"weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum"},
		"timezone": {"auto"}, "forecast_days": {"3"},
	}
	if !sameQuery(f[0].query, wantForecast) {
		t.Errorf("forecast query %v, want %v", f[0].query, wantForecast)
	}
	if ua := f[0].header.Get("User-Agent"); ua != DefaultUserAgent {
		t.Errorf("User-Agent %q", ua)
	}
}

func sameQuery(got, want url.Values) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			return false
		}
	}
	return true
}

// "Springfield, Illinois" is searched as Springfield, and the qualifier
// picks the one in Illinois out of the places found.
func TestWeatherQualifiedPlace(t *testing.T) {
	for _, tt := range []struct {
		location, wantLat, wantLabel string
		wantCount                    string
	}{
		{"Springfield, Illinois", "39.80172", "Springfield, Illinois, United States", "10"},
		{"springfield,massachusetts", "42.10148", "Springfield, Massachusetts, United States", "10"},
		{"Springfield, US", "37.21533", "Springfield, Missouri, United States", "10"},
		// A qualifier that matches nothing: the best match.
		{"Springfield, Narnia", "37.21533", "Springfield, Missouri, United States", "10"},
		{"Springfield", "37.21533", "Springfield, Missouri, United States", "1"},
	} {
		geo, fc, opts := openMeteo(t, fixture(t, 200, "openmeteo/geocoding_springfield.json"), fixture(t, 200, "openmeteo/forecast_berlin.json"))
		got, err := callWeather(t, opts, `{"location":"`+tt.location+`"}`)
		if err != nil || !strings.HasPrefix(got, "Weather for "+tt.wantLabel+" (") {
			t.Errorf("%s: %q, %v", tt.location, got, err)
			continue
		}
		if q := geo.got()[0].query; !strings.EqualFold(q.Get("name"), "Springfield") || q.Get("count") != tt.wantCount {
			t.Errorf("%s: geocoding query %v", tt.location, q)
		}
		if q := fc.got()[0].query; q.Get("latitude") != tt.wantLat || q.Get("forecast_days") != "3" {
			t.Errorf("%s: forecast query %v", tt.location, q)
		}
	}
}

func TestWeatherImperialAndMissingValues(t *testing.T) {
	_, fc, opts := openMeteo(t, fixture(t, 200, "openmeteo/geocoding_springfield.json"), fixture(t, 200, "openmeteo/forecast_imperial_nulls.json"))
	opts.Weather.Units = "imperial"
	got, err := callWeather(t, opts, `{"location":"Springfield, Illinois","days":2}`)
	want := "Weather for Springfield, Illinois, United States (local time 2026-07-04 09:15, America/Chicago)\n" +
		"Now: thunderstorm, 78.4 °F, humidity 64%, wind 9.6 mp/h\n" +
		"Today, Sat 4 Jul: thunderstorm, 70.2 to 88.9 °F, precipitation 0.41 inch\n" +
		"Sun 5 Jul: no forecast"
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	q := fc.got()[0].query
	if q.Get("temperature_unit") != "fahrenheit" || q.Get("wind_speed_unit") != "mph" || q.Get("precipitation_unit") != "inch" || q.Get("forecast_days") != "2" {
		t.Errorf("forecast query %v", q)
	}
}

func TestWeatherFailures(t *testing.T) {
	berlin := fixture(t, 200, "openmeteo/geocoding_berlin.json")
	forecast := fixture(t, 200, "openmeteo/forecast_berlin.json")
	tests := []struct {
		name              string
		geocode, forecast http.HandlerFunc
		args              string
		want              string
		wantForecasts     int
	}{
		{name: "unknown place", geocode: fixture(t, 200, "openmeteo/geocoding_none.json"), forecast: forecast,
			args: `{"location":"Atlantis"}`, want: `no place called "Atlantis" was found`},
		{name: "unknown qualified place", geocode: fixture(t, 200, "openmeteo/geocoding_none.json"), forecast: forecast,
			args: `{"location":"Atlantis, Ocean"}`, want: `no place called "Atlantis, Ocean" was found`},
		{name: "empty results list", geocode: answer(200, "application/json", `{"results":[],"generationtime_ms":0.3}`), forecast: forecast,
			args: `{"location":"Nowhere"}`, want: `no place called "Nowhere" was found`},
		{name: "geocoding down", geocode: fixture(t, 502, "bad_gateway.html"), forecast: forecast,
			args: `{"location":"Berlin"}`, want: "the place search of the weather service answered HTTP 502 Bad Gateway: 502 Bad Gateway"},
		{name: "forecast refuses", geocode: berlin, forecast: fixture(t, 400, "openmeteo/error_400.json"), args: `{"location":"Berlin"}`,
			want: "the weather service answered HTTP 400 Bad Request: Parameter 'forecast_days' is out of allowed range from 0 to 16", wantForecasts: 1},
		{name: "forecast sends a page", geocode: berlin, forecast: fixture(t, 200, "bad_gateway.html"), args: `{"location":"Berlin"}`,
			want: `the weather service sent a web page, not JSON ("502 Bad Gateway"): is its URL right?`, wantForecasts: 1},
		{name: "forecast empty", geocode: berlin, forecast: answer(200, "application/json", `{"latitude":52.52,"longitude":13.41}`), args: `{"location":"Berlin"}`,
			want: "the weather service sent no forecast for this place", wantForecasts: 1},
		{name: "empty location", geocode: berlin, forecast: forecast, args: `{"location":" "}`, want: `the location is empty: give a place name such as "Berlin"`},
		{name: "too many days", geocode: berlin, forecast: forecast, args: `{"location":"Berlin","days":14}`,
			want: `argument "days" must be a whole number from 1 to 7, not 14`},
		{name: "no location", geocode: berlin, forecast: forecast, args: `{"city":"Berlin"}`, want: `unknown argument "city"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, fc, opts := openMeteo(t, tt.geocode, tt.forecast)
			got, err := callWeather(t, opts, tt.args)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %q, %v\nwant an error %q", got, err, tt.want)
			}
			if n := len(fc.got()); n != tt.wantForecasts {
				t.Errorf("%d forecast requests, want %d", n, tt.wantForecasts)
			}
		})
	}
}

func TestWeatherSettings(t *testing.T) {
	for _, tt := range []struct {
		s    WeatherSettings
		want string
	}{
		{WeatherSettings{BaseURL: "api.example.org"}, `tool get_weather: tools.weather.base_url "api.example.org" is not an http or https URL without a query`},
		{WeatherSettings{GeocodingURL: "ftp://example.org"}, `tool get_weather: tools.weather.geocoding_url "ftp://example.org" is not an http or https URL`},
		{WeatherSettings{BaseURL: "https://example.org/?x=1"}, `tools.weather.base_url "https://example.org/?x=1" is not`},
		{WeatherSettings{Units: "kelvin"}, `tool get_weather: tools.weather.units "kelvin" is neither metric nor imperial`},
	} {
		_, err := New([]string{"get_weather"}, Options{Weather: tt.s})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.s, err, tt.want)
		}
	}
	if _, err := New([]string{"get_weather"}, Options{Weather: WeatherSettings{Units: "metric"}}); err != nil {
		t.Error(err)
	}
}

func TestWeatherCodeText(t *testing.T) {
	for v, want := range map[float64]string{3.1: "3.1", 0.41: "0.41", 13.333: "13.33", -0.001: "0", 5: "5", 1e6: "1000000"} {
		if got := formatMeasure(v); got != want {
			t.Errorf("formatMeasure(%v) = %q, want %q", v, got, want)
		}
	}
	for code, want := range map[float64]string{0: "clear sky", 3: "overcast", 45: "fog", 65: "heavy rain", 99: "thunderstorm with heavy hail", 4: "weather code 4", 2.5: "weather code 2.5"} {
		if got := weatherCodeText(code); got != want {
			t.Errorf("code %v: %q, want %q", code, got, want)
		}
	}
}

// One box serves a character's calls at once (run with -race).
func TestWeatherConcurrentCalls(t *testing.T) {
	_, fc, opts := openMeteo(t, fixture(t, 200, "openmeteo/geocoding_berlin.json"), fixture(t, 200, "openmeteo/forecast_berlin.json"))
	b := newBox(t, []string{"get_weather"}, opts)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := b.Call(context.Background(), agent.ToolCall{Name: "get_weather", Arguments: `{"location":"Berlin"}`})
			if err != nil || !strings.HasPrefix(got, "Weather for Berlin, Land Berlin, Germany") {
				errs <- fmt.Errorf("%q, %v", got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(fc.got()); n != 8 {
		t.Errorf("%d forecast requests, want 8", n)
	}
}
