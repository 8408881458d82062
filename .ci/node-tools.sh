# Sourced by .ci/run and .ci/conformance.sh: a Node >= 22 and the official MCP tools (the
# conformance suite and the Inspector CLI), installed with npm under .venv/ and reused on reruns.
# Exports MCP_NODE (that node) and MCP_NODE_TOOLS (their node_modules), which
# tests/test_inspector.py and .ci/conformance.sh read. Debian ships Node 20, and the suite needs
# 22: the npm package node-linux-<arch> is Node itself, so no system install is needed.
# shellcheck shell=bash

MCP_CONFORMANCE_VERSION=0.2.0-alpha.12
MCP_INSPECTOR_VERSION=2.12.0  # has --cli --protocol-era modern (2026-07-28)
# The real OAuth 2.1 authorization server of tests/test_oauth.py (tests/oidc_server.mjs).
OIDC_PROVIDER_VERSION=9.13.3

_node_major() { "$1" --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p'; }
_pkg_version() { sed -n 's/^  "version": "\(.*\)",$/\1/p' "$1/package.json" 2>/dev/null; }

node_tools_install() {
  local root node_dir tools_dir arch
  root=$(pwd)
  node_dir="$root/.venv/node22"
  tools_dir="$root/.venv/mcp-tools"
  if ! command -v npm >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null) \
      || echo "ci: npm could not be installed"
  fi

  MCP_NODE=""
  if command -v node >/dev/null 2>&1 && [ "$(_node_major node)" -ge 22 ] 2>/dev/null; then
    MCP_NODE=$(command -v node)
  else
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64 | arm64) arch=arm64 ;;
      *) arch="" ;;
    esac
    local bin="$node_dir/node_modules/node-linux-$arch/bin/node"
    if [ -n "$arch" ] && [ ! -x "$bin" ] && command -v npm >/dev/null 2>&1; then
      npm install --prefix "$node_dir" --no-save --no-audit --no-fund --silent "node-linux-$arch@22" \
        || echo "ci: node-linux-$arch@22 could not be installed"
    fi
    [ -x "$bin" ] && MCP_NODE="$bin"
  fi
  if [ -z "$MCP_NODE" ]; then
    echo "ci: no Node >= 22; the conformance suite and the Inspector tests are skipped"
    return 0
  fi

  local modules="$tools_dir/node_modules/@modelcontextprotocol"
  if [ "$(_pkg_version "$modules/conformance")" != "$MCP_CONFORMANCE_VERSION" ] \
    || [ "$(_pkg_version "$modules/inspector")" != "$MCP_INSPECTOR_VERSION" ]; then
    # npm runs package scripts with the node on PATH: make that the new one.
    PATH="$(dirname "$MCP_NODE"):$PATH" npm install --prefix "$tools_dir" --no-save --no-audit \
      --no-fund --silent "@modelcontextprotocol/conformance@$MCP_CONFORMANCE_VERSION" \
      "@modelcontextprotocol/inspector@$MCP_INSPECTOR_VERSION" \
      || echo "ci: the MCP conformance suite / Inspector could not be installed"
  fi
  local oidc_dir="$root/.venv/oidc-provider"
  if [ "$(_pkg_version "$oidc_dir/node_modules/oidc-provider")" != "$OIDC_PROVIDER_VERSION" ]; then
    PATH="$(dirname "$MCP_NODE"):$PATH" npm install --prefix "$oidc_dir" --no-save --no-audit \
      --no-fund --silent "oidc-provider@$OIDC_PROVIDER_VERSION" \
      || echo "ci: oidc-provider could not be installed; the OAuth end-to-end tests are skipped"
  fi
  export MCP_NODE
  export MCP_NODE_TOOLS="$tools_dir/node_modules"
  export MCP_OIDC_PROVIDER="$oidc_dir/node_modules"
  echo "ci: node $("$MCP_NODE" --version) at $MCP_NODE; MCP tools in $MCP_NODE_TOOLS"
}

node_tools_install
