// Command dynamic-tools serves two dynamic tools with the parley Go client's
// runner, creates a chat that may call them, and prints the answer.
//
// Start a server ("parley serve"), then, from the same directory (the admin
// token is read from ./parley-data/admin.token unless PARLEY_TOKEN is set):
//
//	go run ./examples/dynamic-tools
//
// With the built-in echo model (the default of a server without a
// configuration), the default message makes the model call both tools.
// With a real model, ask a question instead:
//
//	go run ./examples/dynamic-tools -message "What's the weather in Oslo, and what time is it there?"
//
// See docs/dynamic-tools.md for the flow.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/parleyhq/parley/client"
)

// WeatherIn are the arguments of get_weather; the tool's input_schema is
// derived from this struct.
type WeatherIn struct {
	City string `json:"city" jsonschema:"description=The city, like Paris"`
	Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit,description=Temperature unit (default celsius)"`
}

// Weather is what get_weather answers.
type Weather struct {
	City        string  `json:"city"`
	Temperature float64 `json:"temperature"`
	Unit        string  `json:"unit"`
	Sky         string  `json:"sky"`
}

// TimeIn are the arguments of local_time.
type TimeIn struct {
	Timezone string `json:"timezone" jsonschema:"description=An IANA time zone, like Europe/Paris"`
}

// defaultMessage makes the echo model call both tools.
const defaultMessage = "/call get_weather {\"city\": \"Paris\"}\n/call local_time {\"timezone\": \"Europe/Paris\"}"

func main() {
	url := flag.String("url", envOr("PARLEY_URL", "http://127.0.0.1:8080"), "parley server URL")
	token := flag.String("token", os.Getenv("PARLEY_TOKEN"), "API token (default: ./parley-data/admin.token)")
	message := flag.String("message", defaultMessage, "the first message of the chat")
	flag.Parse()
	if *token == "" {
		b, err := os.ReadFile("parley-data/admin.token")
		if err != nil {
			fmt.Fprintln(os.Stderr, "no token: pass -token or set PARLEY_TOKEN:", err)
			os.Exit(2)
		}
		*token = strings.TrimSpace(string(b))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, client.New(*url, *token), *message, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dynamic-tools:", err)
		os.Exit(1)
	}
}

// run registers the tools, serves them while one chat runs, and prints the
// chat's answer.
func run(ctx context.Context, c *client.Client, message string, out io.Writer) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Answer only the chats this program created: other programs of the
	// same owner may serve tools of their own.
	r := client.NewRunner(c, client.WithLogger(log), client.WithChatFilter(func(ch client.Chat) bool {
		return ch.Labels["app"] == "dynamic-tools-example"
	}))
	client.Handle(r, "get_weather", "Current weather for a city", getWeather)
	client.Handle(r, "local_time", "The current local time in a time zone", localTime)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- r.Run(ctx) }()

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{
		Message:           message,
		DynamicTools:      r.Tools(),
		Labels:            map[string]string{"app": "dynamic-tools-example"},
		ToolResultTimeout: time.Minute,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "chat %s\n", ch.ID)

	// Stream the chat until it is idle again; the runner answers the tool
	// calls in the meantime.
	stream, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Next() {
		ev := stream.Event()
		switch {
		case ev.Kind == client.EventMessage && ev.Message.Role == client.RoleAssistant && ev.Message.Text() != "":
			fmt.Fprintln(out, ev.Message.Text())
		case ev.Kind == client.EventActionRequired:
			for _, call := range ev.ToolCalls {
				fmt.Fprintf(os.Stderr, "the model calls %s %s\n", call.ToolName, call.Args)
			}
		case ev.Kind == client.EventStatus && ev.Status == client.StatusError:
			return fmt.Errorf("the chat failed: %s", ev.Chat.LastError.Message)
		case ev.Kind == client.EventStatus && ev.Status == client.StatusWaiting:
			// Answered (the chat was created pending, so waiting means
			// done). A status that opens a connection comes before the
			// messages: print those the stream has not delivered yet.
			rest, err := c.AllMessages(ctx, ch.ID, stream.Cursor())
			if err != nil {
				return err
			}
			for _, m := range rest {
				if m.Role == client.RoleAssistant && m.Text() != "" {
					fmt.Fprintln(out, m.Text())
				}
			}
			cancel() // stop the runner
			return <-runnerDone
		}
	}
	if err := stream.Err(); err != nil {
		return err
	}
	select {
	case err := <-runnerDone:
		return err
	default:
		return errors.New("the stream ended")
	}
}

// getWeather pretends to ask a weather service.
func getWeather(ctx context.Context, in WeatherIn) (Weather, error) {
	if in.City == "" {
		return Weather{}, errors.New("city is required")
	}
	w := Weather{City: in.City, Temperature: 18, Unit: "celsius", Sky: "partly cloudy"}
	if in.Unit == "fahrenheit" {
		w.Temperature, w.Unit = w.Temperature*9/5+32, "fahrenheit"
	}
	return w, nil
}

// localTime answers the time in a time zone; an unknown zone is an error
// result, which the model sees.
func localTime(ctx context.Context, in TimeIn) (string, error) {
	loc, err := time.LoadLocation(in.Timezone)
	if err != nil {
		return "", fmt.Errorf("unknown time zone %q", in.Timezone)
	}
	return time.Now().In(loc).Format("Monday 15:04 MST"), nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
