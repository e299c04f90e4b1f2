-- Argo CD health of an AppWrapper (workload.codeflare.dev/v1beta2), from the status the AppWrapper controller writes:
-- project-codeflare/appwrapper v1.2.1, api/v1beta2/appwrapper_types.go (AppWrapperStatus 94-122: phase,
-- resettingCount, conditions; AppWrapperPhase 153-165: "", Suspended, Resuming, Running, Resetting, Suspending,
-- Succeeded, Failed, Terminating; conditions 168-176: QuotaReserved, ResourcesDeployed, PodsReady, Unhealthy,
-- DeletingResources), internal/controller/appwrapper/appwrapper_controller.go (Reconcile 101-510: Terminating while
-- a deleted AppWrapper's components go 112-158; "" to Suspended 163-169; Suspended stays while spec.suspend, else
-- Resuming ("Suspend is false") 171-210; Resuming creates the components, Unhealthy CreateFailed 212-242; Running
-- 244-374: Unhealthy MissingComponent or FailedComponent, Succeeded ("<n> pods succeeded and no running, pending, or
-- failed pods" on QuotaReserved and ResourcesDeployed), FoundFailedPods (no message) after a grace period,
-- AutopilotNoExecute, PodsReady ("<n> pods running; <n> pods succeeded") or InsufficientPodsReady; Suspending
-- deletes the components, then Suspended ("Suspend is true") 376-398; Resetting deletes them and pauses, then
-- Resuming 400-435; Failed 437-482; Succeeded 484-507; resetOrFail 522-530: Resetting while resettingCount is below
-- the retry limit (pkg/config/config.go 106: 3) and the failure is not terminal, else Failed).
-- The failure's message is the Unhealthy condition's (its reason where the controller writes no message).
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local st = obj.status or {}
local phase = st.phase or ""

local function condition(ctype)
  for _, c in ipairs(st.conditions or {}) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function said(c, default)
  if c == nil then
    return default
  end
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason or default
end

local unhealthy = condition("Unhealthy")
if unhealthy ~= nil and unhealthy.status ~= "True" then
  unhealthy = nil
end

if phase == "Failed" then
  local message = said(unhealthy, "AppWrapper failed")
  if (st.resettingCount or 0) > 0 then
    message = message .. " (after " .. tostring(st.resettingCount) .. " resets)"
  end
  return {status = "Degraded", message = message}
end
if phase == "Succeeded" then
  return {status = "Healthy", message = said(condition("QuotaReserved"), "AppWrapper succeeded")}
end
if phase == "Suspending" or (phase == "Suspended" and (obj.spec or {}).suspend == true) then
  return {status = "Suspended", message = phase .. ": " .. said(condition("QuotaReserved"), "spec.suspend is true")}
end
if phase == "Resetting" then
  return {status = "Progressing", message = "Resetting (resettingCount " .. tostring(st.resettingCount or 0) .. "): " ..
                                            said(unhealthy, "deleting the components to retry")}
end
if phase == "Running" then
  if unhealthy ~= nil then
    return {status = "Progressing", message = "Running, unhealthy: " .. said(unhealthy, "")}
  end
  return {status = "Progressing", message = "Running: " .. said(condition("PodsReady"), "components deployed")}
end
if phase == "Resuming" then
  return {status = "Progressing", message = "Resuming: " .. said(condition("ResourcesDeployed"), "deploying the components")}
end
if phase == "Terminating" then
  return {status = "Progressing", message = "Terminating: deleting the components"}
end
if phase == "Suspended" then
  return {status = "Progressing", message = "Suspended: spec.suspend is false, about to deploy the components"}
end
return {status = "Progressing", message = "Waiting for the AppWrapper controller to report the phase"}
