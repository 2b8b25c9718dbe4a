"""A Go monorepo's files, as text: the fixed corpus ``test_files_wording`` ranks over (a
Makefile whose ``proto`` target runs ``buf generate``, two Dockerfiles, a service's
``config.yaml`` with its ``retry:`` block, Go and proto sources, and files that share
their words: a Terraform template's ``machine_image``, a CI workflow's ``images`` job)."""

from __future__ import annotations

GO_MONOREPO: dict[str, str] = {
    "Makefile": """\
# Developer tasks for the monorepo.
SHELL := /bin/bash
GO ?= go
SERVICES := payments ledger gateway

.PHONY: help build test lint proto docker clean

help:
\t@grep -E '^[a-z]+:' $(firstword $(MAKEFILE_LIST)) | cut -d: -f1

build:
\t$(GO) build ./...

test:
\t$(GO) test -race -count=1 ./...

lint:
\tgolangci-lint run ./...

proto:
\tbuf lint proto
\tbuf generate proto

docker:
\tfor s in $(SERVICES); do docker build -f services/$$s/Dockerfile -t $$s:dev .; done

clean:
\trm -rf bin/ gen/
""",
    "buf.yaml": """\
version: v2
modules:
  - path: proto
lint:
  use:
    - STANDARD
breaking:
  use:
    - FILE
""",
    "buf.gen.yaml": """\
version: v2
plugins:
  - remote: buf.build/protocolbuffers/go
    out: gen/go
    opt: paths=source_relative
  - remote: buf.build/grpc/go
    out: gen/go
    opt: paths=source_relative
""",
    "go.mod": """\
module example.com/monorepo

go 1.22

require (
\tgithub.com/jackc/pgx/v5 v5.5.5
\tgoogle.golang.org/grpc v1.63.2
\tgoogle.golang.org/protobuf v1.34.1
\tgopkg.in/yaml.v3 v3.0.1
)
""",
    "README.md": """\
# monorepo

Services for payments, the ledger and the public gateway, in Go.

## Layout

- `services/`: one directory per service, each with its `cmd/` and its Dockerfile.
- `proto/`: the gRPC APIs between the services.
- `deploy/`: configuration and infrastructure for each environment.
- `internal/`: packages shared by the services.

## Working on it

Install Go 1.22 and buf, then run the tests with the race detector. The services read
their settings from `deploy/<service>/config.yaml` at start.
""",
    "proto/payments/v1/payments.proto": """\
syntax = "proto3";

package payments.v1;

option go_package = "example.com/monorepo/gen/go/payments/v1;paymentsv1";

// PaymentsService charges and refunds customer payments.
service PaymentsService {
  rpc Charge(ChargeRequest) returns (ChargeResponse);
  rpc Refund(RefundRequest) returns (RefundResponse);
}

message ChargeRequest {
  string customer_id = 1;
  int64 amount_cents = 2;
  string currency = 3;
  string idempotency_key = 4;
}

message ChargeResponse {
  string payment_id = 1;
  string status = 2;
}

message RefundRequest {
  string payment_id = 1;
  int64 amount_cents = 2;
}

message RefundResponse {
  string refund_id = 1;
}
""",
    "proto/ledger/v1/ledger.proto": """\
syntax = "proto3";

package ledger.v1;

option go_package = "example.com/monorepo/gen/go/ledger/v1;ledgerv1";

// LedgerService records double-entry postings.
service LedgerService {
  rpc Post(PostRequest) returns (PostResponse);
  rpc Balance(BalanceRequest) returns (BalanceResponse);
}

message PostRequest {
  string account = 1;
  int64 amount_cents = 2;
  string reference = 3;
}

message PostResponse {
  string entry_id = 1;
}

message BalanceRequest {
  string account = 1;
}

message BalanceResponse {
  int64 balance_cents = 1;
}
""",
    "services/payments/Dockerfile": """\
FROM golang:1.22 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/payments ./services/payments/cmd/payments

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/payments /payments
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/payments"]
""",
    "services/ledger/Dockerfile": """\
# syntax=docker/dockerfile:1
FROM golang:1.22 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ledger ./services/ledger/cmd/ledger

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ledger /ledger
USER nonroot:nonroot
ENTRYPOINT ["/ledger"]
""",
    "services/payments/cmd/payments/main.go": """\
package main

import (
\t"context"
\t"log"
\t"os"
\t"os/signal"

\t"example.com/monorepo/internal/config"
\t"example.com/monorepo/services/payments"
)

func main() {
\tctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
\tdefer stop()
\tcfg, err := config.Load(os.Getenv("PAYMENTS_CONFIG"))
\tif err != nil {
\t\tlog.Fatalf("payments: config: %v", err)
\t}
\tsrv, err := payments.NewServer(ctx, cfg)
\tif err != nil {
\t\tlog.Fatalf("payments: %v", err)
\t}
\tlog.Fatal(srv.Serve(ctx, cfg.Listen))
}
""",
    "services/payments/client.go": """\
package payments

import (
\t"context"
\t"fmt"
\t"net/http"
\t"time"

\t"example.com/monorepo/internal/retry"
)

// ProviderClient calls the card processor's HTTP API.
type ProviderClient struct {
\thttp    *http.Client
\tbaseURL string
\tpolicy  retry.Policy
}

// NewProviderClient returns a client for baseURL that retries as policy says.
func NewProviderClient(baseURL string, timeout time.Duration, policy retry.Policy) *ProviderClient {
\treturn &ProviderClient{http: &http.Client{Timeout: timeout}, baseURL: baseURL, policy: policy}
}

// Charge asks the processor to charge a card.
func (c *ProviderClient) Charge(ctx context.Context, req ChargeRequest) (*ChargeResult, error) {
\tvar out ChargeResult
\terr := retry.Do(ctx, c.policy, func(ctx context.Context) error {
\t\treturn c.post(ctx, "/v1/charges", req, &out)
\t})
\tif err != nil {
\t\treturn nil, fmt.Errorf("charge %s: %w", req.IdempotencyKey, err)
\t}
\treturn &out, nil
}
""",
    "services/payments/server.go": """\
package payments

import (
\t"context"

\t"example.com/monorepo/internal/config"
\t"example.com/monorepo/internal/retry"
)

// Server serves the PaymentsService API.
type Server struct {
\tclient *ProviderClient
\tledger LedgerClient
}

// NewServer wires the payments service from its configuration.
func NewServer(ctx context.Context, cfg *config.Config) (*Server, error) {
\tpolicy := retry.Policy{
\t\tMaxAttempts:    cfg.Processor.Retry.MaxAttempts,
\t\tInitialBackoff: cfg.Processor.Retry.InitialBackoff,
\t\tMaxBackoff:     cfg.Processor.Retry.MaxBackoff,
\t}
\tclient := NewProviderClient(cfg.Processor.BaseURL, cfg.Processor.Timeout, policy)
\tledger, err := DialLedger(ctx, cfg.LedgerAddr)
\tif err != nil {
\t\treturn nil, err
\t}
\treturn &Server{client: client, ledger: ledger}, nil
}
""",
    "internal/retry/retry.go": """\
// Package retry runs an operation again after a transient failure, with
// exponential backoff and jitter.
package retry

import (
\t"context"
\t"errors"
\t"math/rand"
\t"time"
)

// Policy says how often and how long to wait between attempts.
type Policy struct {
\tMaxAttempts    int
\tInitialBackoff time.Duration
\tMaxBackoff     time.Duration
}

// ErrPermanent marks an error that no retry can fix.
var ErrPermanent = errors.New("permanent failure")

// Do calls op until it succeeds, fails permanently or the attempts run out.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
\tbackoff := p.InitialBackoff
\tvar err error
\tfor attempt := 0; attempt < p.MaxAttempts; attempt++ {
\t\tif err = op(ctx); err == nil || errors.Is(err, ErrPermanent) {
\t\t\treturn err
\t\t}
\t\tjitter := time.Duration(rand.Int63n(int64(backoff) / 2))
\t\tselect {
\t\tcase <-ctx.Done():
\t\t\treturn ctx.Err()
\t\tcase <-time.After(backoff + jitter):
\t\t}
\t\tbackoff = min(backoff*2, p.MaxBackoff)
\t}
\treturn err
}
""",
    "internal/config/config.go": """\
// Package config reads a service's YAML settings.
package config

import (
\t"os"
\t"time"

\t"gopkg.in/yaml.v3"
)

// Config is a service's settings file.
type Config struct {
\tListen     string    `yaml:"listen"`
\tDatabase   Database  `yaml:"database"`
\tProcessor  Processor `yaml:"processor"`
\tLedgerAddr string    `yaml:"ledger_addr"`
}

// Database is where the service keeps its state.
type Database struct {
\tDSN          string `yaml:"dsn"`
\tMaxOpenConns int    `yaml:"max_open_conns"`
}

// Processor is the card processor the payments service charges through.
type Processor struct {
\tBaseURL string        `yaml:"base_url"`
\tTimeout time.Duration `yaml:"timeout"`
\tRetry   Retry         `yaml:"retry"`
}

// Retry is how a failed call to the processor is tried again.
type Retry struct {
\tMaxAttempts    int           `yaml:"max_attempts"`
\tInitialBackoff time.Duration `yaml:"initial_backoff"`
\tMaxBackoff     time.Duration `yaml:"max_backoff"`
}

// Load reads the settings at path.
func Load(path string) (*Config, error) {
\traw, err := os.ReadFile(path)
\tif err != nil {
\t\treturn nil, err
\t}
\tvar cfg Config
\treturn &cfg, yaml.Unmarshal(raw, &cfg)
}
""",
    "deploy/payments/config.yaml": """\
# Settings of the payments service in production.
listen: ":8080"
ledger_addr: "ledger.internal:9090"

database:
  dsn: "postgres://payments@db.internal:5432/payments?sslmode=require"
  max_open_conns: 20

# The card processor the payments client charges through.
processor:
  base_url: "https://api.processor.example"
  timeout: 5s
  retry:
    max_attempts: 4
    initial_backoff: 200ms
    max_backoff: 5s
""",
    "deploy/ledger/config.yaml": """\
# Settings of the ledger service in production.
listen: ":9090"

database:
  dsn: "postgres://ledger@db.internal:5432/ledger?sslmode=require"
  max_open_conns: 40
""",
    "deploy/terraform/payments.tf": """\
resource "google_compute_instance_template" "payments" {
  name_prefix  = "payments-"
  machine_type = "e2-standard-4"

  disk {
    source_image = var.machine_image
    auto_delete  = true
    boot         = true
  }

  network_interface {
    network = google_compute_network.main.id
  }

  metadata = {
    image   = var.payments_image
    service = "payments"
  }
}

variable "machine_image" {
  description = "The boot disk image of the payments instances."
  type        = string
}

variable "payments_image" {
  description = "The container image the payments instances run."
  type        = string
}
""",
    ".github/workflows/ci.yaml": """\
name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: "1.22"
      - run: make lint test
  images:
    runs-on: ubuntu-latest
    needs: test
    steps:
      - uses: actions/checkout@v4
      - run: make docker
""",
}
