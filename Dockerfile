# syntax=docker/dockerfile:1
# Build: docker build -t koe .
#        docker build --target node -t koe:node .   (with Node.js, for npm MCP servers)
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

FROM debian:bookworm-slim AS runtime
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

# The image with Node.js and npm (Debian's), for MCP servers that are npm
# packages run over stdio (command: npx). npx fetches a package into the
# koe user's cache under /data/.npm at a server's first start; to start
# without the network, install them in an image of your own FROM this one:
#   USER root
#   RUN npm install -g @modelcontextprotocol/server-filesystem
#   USER koe
# and configure command: mcp-server-filesystem.
FROM runtime AS node
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm \
 && rm -rf /var/lib/apt/lists/*
USER koe

# The default image, without Node.js.
FROM runtime
