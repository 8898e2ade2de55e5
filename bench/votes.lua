-- wrk script: every request a vote from a new anonymous voter (no voter
-- cookie), rotating over the poll's choices. args: path, then choice ids.
local threads = {}
local csrf = "benchcsrfbenchcsrfbenchcsrfbench"

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  path = args[1]
  choices = {}
  for i = 2, #args do table.insert(choices, args[i]) end
  n, accepted, other = 0, 0, 0
end

function request()
  n = n + 1
  return wrk.format("POST", path, {
    ["Cookie"] = "csrftoken=" .. csrf,
    ["X-CSRFToken"] = csrf,
    ["Accept"] = "application/json",
    ["Content-Type"] = "application/x-www-form-urlencoded",
  }, "choice=" .. choices[(n % #choices) + 1])
end

function response(status, headers, body)
  if status == 200 then accepted = accepted + 1 else other = other + 1 end
end

function done(summary, latency, requests)
  local a, o = 0, 0
  for _, thread in ipairs(threads) do
    a = a + thread:get("accepted"); o = o + thread:get("other")
  end
  io.write(string.format("COUNTS accepted=%d other=%d\n", a, o))
end
