# syntax=docker/dockerfile:1
# The fleet service as a container image (docs/production.md): built in the first stage with the
# whole toolchain, run in the second from the production artifact alone (`npm run build`'s output
# after `npm ci --omit=dev`), as the unprivileged `node` user.
#   docker build -t fleet .
#   docker run -d --name fleet -p 8080:8080 -p 1883:1883 -v fleet-data:/var/lib/fleet fleet
ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim
# PORT and MQTT_PORT set: a configured start never moves to another port (the published ones).
ENV NODE_ENV=production \
    DATA_DIR=/var/lib/fleet \
    PORT=8080 \
    MQTT_PORT=1883
WORKDIR /opt/fleet
COPY --from=build /src/dist/ ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && mkdir -p /var/lib/fleet \
 && chown node:node /var/lib/fleet
USER node
# The embedded database, firmware files and the server secret (unless FLEET_SECRET is set).
VOLUME /var/lib/fleet
EXPOSE 8080 1883 8883
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.PORT + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node itself is PID 1: it gets `docker stop`'s SIGTERM and shuts down cleanly (exit 0).
CMD ["node", "--enable-source-maps", "server/main.js"]
