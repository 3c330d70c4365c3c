package pgtest

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestDSNIsolatedSchema(t *testing.T) {
	base := Require(t)
	var schemas []string
	for range 2 {
		t.Run("schema", func(t *testing.T) {
			conn, err := pgx.Connect(t.Context(), DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(t.Context())
			var schema string
			if err := conn.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(schema, "t_") {
				t.Fatalf("current_schema() = %q, want t_<random>", schema)
			}
			// Empty, and a table created without a schema name lands in it.
			if _, err := conn.Exec(t.Context(), `CREATE TABLE owners (name text PRIMARY KEY)`); err != nil {
				t.Fatalf("create a table in a fresh schema: %v", err)
			}
			var where string
			if err := conn.QueryRow(t.Context(), `SELECT schemaname FROM pg_tables WHERE tablename = 'owners' AND schemaname = $1`, schema).Scan(&where); err != nil {
				t.Fatal(err)
			}
			schemas = append(schemas, schema)
		})
	}
	if len(schemas) != 2 || schemas[0] == schemas[1] {
		t.Fatalf("schemas %v, want two distinct ones", schemas)
	}
	conn, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1)`, schemas).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d test schemas left after their tests ended", left)
	}
}

func TestWithSearchPath(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable": "postgres://u@h:5432/db?application_name=t_x&search_path=t_x&sslmode=disable&synchronous_commit=off",
		"host=h dbname=db":                       "host=h dbname=db search_path=t_x synchronous_commit=off application_name=t_x",
	} {
		got, err := withSearchPath(in, "t_x")
		if err != nil || got != want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
