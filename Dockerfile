# syntax=docker/dockerfile:1
# Build: docker build -t koe .
# Run:   docker run -p 12393:12393 -v koe-data:/data -e KOE_AUTH_TOKEN=<16+ chars> \
#          -e OPENAI_BASE_URL=http://host.docker.internal:11434/v1 koe
# koe listens on all interfaces in the container, so it needs its access
# token (or server.insecure_no_auth: true in a mounted conf.yaml).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/koe ./cmd/koe

FROM debian:bookworm-slim
# espeak-ng and pocketsphinx are koe's default speech engines (out, in);
# ca-certificates for HTTPS LLMs.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates espeak-ng pocketsphinx pocketsphinx-en-us \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data koe \
 && mkdir -p /data /app && chown koe:koe /data
COPY --from=build /out/koe /usr/local/bin/koe
COPY conf.example.yaml /app/conf.example.yaml
WORKDIR /app
USER koe
VOLUME ["/data"]
EXPOSE 12393
# Mount your own /app/conf.yaml to configure; without it the defaults apply.
ENTRYPOINT ["koe", "-host", "0.0.0.0", "-data", "/data"]
