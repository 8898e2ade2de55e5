-- wrk script: POST report starts, rotating over many users' sessions, and
-- count the answers by status. Sessions come from the file named in args[1].
-- With a path in args[2] it GETs that path instead (the load-shedding
-- benchmark's baseline poll), made the same way so wrk costs the same for both.
local threads = {}
local csrf = "benchcsrfbenchcsrfbenchcsrfbench"
local body = "date_from=2024-01-01&date_to=2025-12-31&min_units=1"

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  sessions = {}
  for line in io.lines(args[1]) do table.insert(sessions, line) end
  poll = args[2]
  n, accepted, refused, other = 0, 0, 0, 0
end

function request()
  n = n + 1
  local session = sessions[(n % #sessions) + 1]
  if poll then
    return wrk.format("GET", poll, {
      ["Cookie"] = "sessionid=" .. session,
      ["Accept"] = "application/json",
    })
  end
  return wrk.format("POST", "/reports/return-rates/", {
    ["Cookie"] = "sessionid=" .. session .. "; csrftoken=" .. csrf,
    ["X-CSRFToken"] = csrf,
    ["Accept"] = "application/json",
    ["Content-Type"] = "application/x-www-form-urlencoded",
  }, body)
end

function response(status, headers, body)
  if status == 202 or (poll and status == 200) then accepted = accepted + 1
  elseif status == 503 then refused = refused + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local a, r, o = 0, 0, 0
  for _, thread in ipairs(threads) do
    a = a + thread:get("accepted"); r = r + thread:get("refused"); o = o + thread:get("other")
  end
  io.write(string.format("COUNTS accepted=%d refused=%d other=%d\n", a, r, o))
end
