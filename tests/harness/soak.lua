-- wrk script for the soak: a day's mix of traffic in a fixed cycle of 20
-- requests; prints how many answers of each status there were.
-- args: poll id, choice id, job id, read token, session cookie, csrf token
function init(args)
  poll, choice, job, token, session, csrf = args[1], args[2], args[3], args[4], args[5], args[6]
  n = 0
  statuses = {}
end

local function post(path, body, cookie)
  return wrk.format("POST", path, {
    ["Cookie"] = cookie,
    ["X-CSRFToken"] = csrf,
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Accept"] = "application/json",
  }, body)
end

local function get(path, cookie)
  return wrk.format("GET", path, cookie and { ["Cookie"] = cookie } or {})
end

function request()
  n = n + 1
  local slot = n % 20
  local anonymous = "csrftoken=" .. csrf
  local user = "csrftoken=" .. csrf .. "; sessionid=" .. session
  if slot < 6 then return get("/polls/" .. poll .. "/results.json") end
  if slot < 9 then return get("/polls/" .. poll .. "/") end
  if slot < 12 then return get("/no/such/page/" .. n .. "/") end
  -- No voter cookie: every vote is a new anonymous voter's.
  if slot < 15 then return post("/polls/" .. poll .. "/vote/", "choice=" .. choice, anonymous) end
  if slot == 15 then return get("/accounts/login/") end
  if slot == 16 then return get("/progress/" .. job .. "/", user) end
  if slot == 17 then
    return post("/reports/top-customers/", "date_from=2024-01-01&date_to=2025-12-31&top=5&region=", user)
  end
  if slot == 18 then return get("/polls/") end
  -- Logins cost a password hash each: one cycle in fifty.
  if n % 1000 == 19 then return post("/accounts/login/", "username=soak&password=soak-password-1", anonymous) end
  return get("/progress/" .. job .. "/" .. token .. "/")
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end


local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local seen = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for status, count in pairs(s) do seen[status] = (seen[status] or 0) + count end
  end
  for status, count in pairs(seen) do io.write(string.format("status %d %d\n", status, count)) end
end
