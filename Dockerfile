# Builds a static inorder binary on an empty image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/inorder-proxy/inorder/cmd.Version=${VERSION}" -o /out/inorder ./cmd/inorder

FROM scratch
COPY --from=build /out/inorder /inorder
USER 65532:65532
EXPOSE 9092
ENTRYPOINT ["/inorder"]
CMD ["serve", "--help"]
