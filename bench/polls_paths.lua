-- wrk script: GET progress polls rotating over many jobs' URLs, read from the
-- file named in args[1] (one path per line), with an optional Cookie header
-- in args[2]. Counts answers by status and how many nginx's fast path served.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  paths = {}
  for line in io.lines(args[1]) do table.insert(paths, line) end
  headers = {}
  if args[2] then headers["Cookie"] = args[2] end
  n, ok, fast, other = 0, 0, 0, 0
end

function request()
  n = n + 1
  return wrk.format("GET", paths[(n % #paths) + 1], headers)
end

function response(status, headers, body)
  if status == 200 then ok = ok + 1 else other = other + 1 end
  if headers["X-Progress-Source"] == "memcached" then fast = fast + 1 end
end

function done(summary, latency, requests)
  local o, f, x = 0, 0, 0
  for _, thread in ipairs(threads) do
    o = o + thread:get("ok"); f = f + thread:get("fast"); x = x + thread:get("other")
  end
  io.write(string.format("COUNTS ok=%d fast=%d other=%d\n", o, f, x))
end
