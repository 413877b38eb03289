import {
  listServiceRequests,
  type ServiceRequestStatus,
  setServiceRequestStatus,
} from "../billing/add-ons.server.ts";
import { recordAudit } from "../platform/audit.server.ts";

// Add-ons that are requests, not purchases (decision 0101): operators follow them up here.

export const opsServiceRequests = () => listServiceRequests(["open", "in_progress"]);

export async function moveServiceRequest(id: string, status: ServiceRequestStatus) {
  const request = await setServiceRequestStatus(id, status);
  await recordAudit({
    action: "service_request.updated",
    userId: request.userId,
    target: id,
    details: { addon: request.addon, status },
  });
  return request;
}
