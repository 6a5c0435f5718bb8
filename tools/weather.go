package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const weatherName = "get_weather"

// Defaults of tools.weather: Open-Meteo's public API, which needs no key.
const (
	DefaultWeatherBaseURL      = "https://api.open-meteo.com"
	DefaultWeatherGeocodingURL = "https://geocoding-api.open-meteo.com"
)

// defaultForecastDays is the forecast's length when the model does not
// ask: today and the next two days, enough for "this weekend?" most days
// without a long answer to read aloud.
const defaultForecastDays = 3

// WeatherSettings are tools.weather: where an Open-Meteo-compatible API
// answers, and in which units.
type WeatherSettings struct {
	// BaseURL serves /v1/forecast (empty: DefaultWeatherBaseURL).
	BaseURL string `yaml:"base_url"`
	// GeocodingURL serves /v1/search (empty: DefaultWeatherGeocodingURL).
	GeocodingURL string `yaml:"geocoding_url"`
	// Units is "metric" (the default: °C, km/h, mm) or "imperial" (°F,
	// mph, inches).
	Units string `yaml:"units"`
}

type weatherArgs struct {
	Location string `json:"location"`
	Days     int    `json:"days"`
}

var weatherSchema = newSchema(map[string]property{
	"location": {
		Type: "string",
		Description: `The place: a city, town or village name such as "Berlin" or "Springfield, Illinois". ` +
			"Add a country or region after a comma when the name is ambiguous.",
	},
	"days": integer(1, 7, fmt.Sprintf("How many days of forecast, today first (default %d).", defaultForecastDays)),
}, "location")

type weather struct {
	forecast, geocoding webClient
	baseURL, geoURL     string
	imperial            bool
}

func newWeather(opts Options) (tool, error) {
	s := opts.Weather
	if s.BaseURL == "" {
		s.BaseURL = DefaultWeatherBaseURL
	}
	if s.GeocodingURL == "" {
		s.GeocodingURL = DefaultWeatherGeocodingURL
	}
	if err := checkBaseURL("tools.weather.base_url", s.BaseURL); err != nil {
		return tool{}, err
	}
	if err := checkBaseURL("tools.weather.geocoding_url", s.GeocodingURL); err != nil {
		return tool{}, err
	}
	if s.Units != "" && s.Units != "metric" && s.Units != "imperial" {
		return tool{}, fmt.Errorf("tools.weather.units %q is neither metric nor imperial", s.Units)
	}
	w := &weather{
		forecast:  newWebClient(opts, "the weather service"),
		geocoding: newWebClient(opts, "the place search of the weather service"),
		baseURL:   s.BaseURL,
		geoURL:    s.GeocodingURL,
		imperial:  s.Units == "imperial",
	}
	return tool{
		spec: agentSpec(weatherName,
			"Gets the current weather and a daily forecast of up to 7 days for a place, by its name. "+
				"Use it whenever the user asks about weather, temperature, rain or wind somewhere.",
			weatherSchema),
		run: func(ctx context.Context, args string) (string, error) {
			var a weatherArgs
			if err := weatherSchema.decode(args, &a); err != nil {
				return "", err
			}
			return w.report(ctx, a)
		},
	}, nil
}

func (w *weather) report(ctx context.Context, a weatherArgs) (string, error) {
	location := oneLine(a.Location)
	if location == "" {
		return "", errors.New(`the location is empty: give a place name such as "Berlin"`)
	}
	days := a.Days
	if days == 0 {
		days = defaultForecastDays
	}
	p, err := w.find(ctx, location)
	if err != nil {
		return "", err
	}
	q := url.Values{
		"latitude":      {strconv.FormatFloat(p.Latitude, 'f', -1, 64)},
		"longitude":     {strconv.FormatFloat(p.Longitude, 'f', -1, 64)},
		"current":       {"temperature_2m,relative_humidity_2m,apparent_temperature,weather_code,wind_speed_10m"},
		"daily":         {"weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum"},
		"timezone":      {"auto"},
		"forecast_days": {strconv.Itoa(days)},
	}
	if w.imperial {
		q.Set("temperature_unit", "fahrenheit")
		q.Set("wind_speed_unit", "mph")
		q.Set("precipitation_unit", "inch")
	}
	var f forecast
	if err := w.forecast.getJSON(ctx, endpoint(w.baseURL, "/v1/forecast", q), &f); err != nil {
		return "", err
	}
	return f.text(p)
}

// place is a geocoding result, in Open-Meteo's field names.
type place struct {
	Name        string  `json:"name"`
	Latitude    float64 `json:"latitude"`
	Longitude   float64 `json:"longitude"`
	Country     string  `json:"country"`
	CountryCode string  `json:"country_code"`
	Admin1      string  `json:"admin1"`
	Admin2      string  `json:"admin2"`
	Admin3      string  `json:"admin3"`
	Admin4      string  `json:"admin4"`
}

// geocodingCandidates is how many places are fetched for a name with a
// qualifier ("Springfield, Illinois"), so that one matching the qualifier
// can be picked.
const geocodingCandidates = 10

// find geocodes a location. Open-Meteo matches a place's name alone, so
// "Paris, France" is searched as "Paris" and the part after the comma
// picks among the places found.
func (w *weather) find(ctx context.Context, location string) (place, error) {
	name, qualifier, _ := strings.Cut(location, ",")
	name, qualifier = strings.TrimSpace(name), strings.TrimSpace(qualifier)
	if name == "" {
		name, qualifier = qualifier, ""
	}
	count := 1
	if qualifier != "" {
		count = geocodingCandidates
	}
	q := url.Values{"name": {name}, "count": {strconv.Itoa(count)}, "language": {"en"}, "format": {"json"}}
	var res struct {
		Results []place `json:"results"`
	}
	if err := w.geocoding.getJSON(ctx, endpoint(w.geoURL, "/v1/search", q), &res); err != nil {
		return place{}, err
	}
	if len(res.Results) == 0 {
		return place{}, fmt.Errorf("no place called %q was found", clip(location))
	}
	for _, p := range res.Results {
		if p.matches(qualifier) {
			return p, nil
		}
	}
	return res.Results[0], nil
}

// matches reports whether a qualifier such as "France", "FR" or
// "Illinois" names the place's country or one of its regions.
func (p place) matches(qualifier string) bool {
	for _, part := range []string{p.Country, p.CountryCode, p.Admin1, p.Admin2, p.Admin3, p.Admin4} {
		if part != "" && strings.EqualFold(part, qualifier) {
			return true
		}
	}
	return false
}

func (p place) label() string {
	parts := []string{p.Name}
	if p.Admin1 != "" && p.Admin1 != p.Name {
		parts = append(parts, p.Admin1)
	}
	if p.Country != "" {
		parts = append(parts, p.Country)
	}
	return strings.Join(parts, ", ")
}

// forecast is Open-Meteo's answer, the fields asked for. Values are
// pointers since the API writes null for what a model does not know.
type forecast struct {
	Timezone     string            `json:"timezone"`
	CurrentUnits map[string]string `json:"current_units"`
	Current      *struct {
		Time        string   `json:"time"`
		Temperature *float64 `json:"temperature_2m"`
		Humidity    *float64 `json:"relative_humidity_2m"`
		Apparent    *float64 `json:"apparent_temperature"`
		WeatherCode *float64 `json:"weather_code"`
		WindSpeed   *float64 `json:"wind_speed_10m"`
	} `json:"current"`
	DailyUnits map[string]string `json:"daily_units"`
	Daily      *struct {
		Time          []string   `json:"time"`
		WeatherCode   []*float64 `json:"weather_code"`
		TempMax       []*float64 `json:"temperature_2m_max"`
		TempMin       []*float64 `json:"temperature_2m_min"`
		Precipitation []*float64 `json:"precipitation_sum"`
	} `json:"daily"`
}

// text writes the forecast to be read aloud or summarised: the place, now,
// then a line per day.
func (f forecast) text(p place) (string, error) {
	if f.Current == nil && (f.Daily == nil || len(f.Daily.Time) == 0) {
		return "", errors.New("the weather service sent no forecast for this place")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Weather for %s", p.label())
	if f.Current != nil && f.Current.Time != "" {
		fmt.Fprintf(&b, " (local time %s", strings.Replace(f.Current.Time, "T", " ", 1))
		if f.Timezone != "" {
			fmt.Fprintf(&b, ", %s", f.Timezone)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if c := f.Current; c != nil {
		var parts []string
		if c.WeatherCode != nil {
			parts = append(parts, weatherCodeText(*c.WeatherCode))
		}
		if c.Temperature != nil {
			parts = append(parts, measure(*c.Temperature, unit(f.CurrentUnits, "temperature_2m", "°C")))
		}
		if c.Apparent != nil {
			parts = append(parts, "feels like "+measure(*c.Apparent, unit(f.CurrentUnits, "apparent_temperature", "°C")))
		}
		if c.Humidity != nil {
			parts = append(parts, "humidity "+measure(*c.Humidity, unit(f.CurrentUnits, "relative_humidity_2m", "%")))
		}
		if c.WindSpeed != nil {
			parts = append(parts, "wind "+measure(*c.WindSpeed, unit(f.CurrentUnits, "wind_speed_10m", "km/h")))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "Now: %s\n", strings.Join(parts, ", "))
		}
	}
	if d := f.Daily; d != nil {
		tempUnit := unit(f.DailyUnits, "temperature_2m_max", "°C")
		rainUnit := unit(f.DailyUnits, "precipitation_sum", "mm")
		for i, day := range d.Time {
			var parts []string
			if code := at(d.WeatherCode, i); code != nil {
				parts = append(parts, weatherCodeText(*code))
			}
			lo, hi := at(d.TempMin, i), at(d.TempMax, i)
			switch {
			case lo != nil && hi != nil:
				parts = append(parts, fmt.Sprintf("%s to %s", formatMeasure(*lo), measure(*hi, tempUnit)))
			case hi != nil:
				parts = append(parts, "high "+measure(*hi, tempUnit))
			case lo != nil:
				parts = append(parts, "low "+measure(*lo, tempUnit))
			}
			if rain := at(d.Precipitation, i); rain != nil {
				parts = append(parts, "precipitation "+measure(*rain, rainUnit))
			}
			if len(parts) == 0 {
				parts = append(parts, "no forecast")
			}
			fmt.Fprintf(&b, "%s: %s\n", dayLabel(day, i), strings.Join(parts, ", "))
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// dayLabel writes a forecast date as a weekday and date ("Tue 16 Jan"),
// the first one as today.
func dayLabel(date string, i int) string {
	label := date
	if t, err := time.Parse(time.DateOnly, date); err == nil {
		label = t.Format("Mon 2 Jan")
	}
	if i == 0 {
		label = "Today, " + label
	}
	return label
}

func at(values []*float64, i int) *float64 {
	if i < len(values) {
		return values[i]
	}
	return nil
}

func unit(units map[string]string, key, fallback string) string {
	if u := units[key]; u != "" {
		return u
	}
	return fallback
}

func measure(v float64, unit string) string {
	if unit == "%" {
		return formatMeasure(v) + "%"
	}
	return formatMeasure(v) + " " + unit
}

// formatMeasure writes a reading with at most two decimals: the API
// gives one for most values and two for inches of rain.
func formatMeasure(v float64) string {
	s := strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	if s == "-0" {
		return "0"
	}
	return s
}

// weatherCodes are the WMO weather interpretation codes Open-Meteo uses.
var weatherCodes = map[int]string{
	0:  "clear sky",
	1:  "mainly clear",
	2:  "partly cloudy",
	3:  "overcast",
	45: "fog",
	48: "freezing fog",
	51: "light drizzle",
	53: "drizzle",
	55: "dense drizzle",
	56: "light freezing drizzle",
	57: "dense freezing drizzle",
	61: "light rain",
	63: "rain",
	65: "heavy rain",
	66: "light freezing rain",
	67: "heavy freezing rain",
	71: "light snow",
	73: "snow",
	75: "heavy snow",
	77: "snow grains",
	80: "light rain showers",
	81: "rain showers",
	82: "violent rain showers",
	85: "light snow showers",
	86: "heavy snow showers",
	95: "thunderstorm",
	96: "thunderstorm with light hail",
	99: "thunderstorm with heavy hail",
}

func weatherCodeText(code float64) string {
	if s, ok := weatherCodes[int(code)]; ok && code == float64(int(code)) {
		return s
	}
	return fmt.Sprintf("weather code %s", formatMeasure(code))
}
